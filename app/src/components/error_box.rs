use leptos::prelude::*;

use crate::AppError;

/// An error from a server function, with what to do next.
#[component]
pub fn ErrorBox(error: AppError) -> impl IntoView {
    let login = matches!(error, AppError::Unauthorized);
    view! {
        <div class="rounded-lg border border-red-200 bg-red-50 p-4 text-red-800" role="alert">
            <p>{error.to_string()}</p>
            {login
                .then(|| {
                    view! {
                        <a class="mt-2 inline-block underline" href="/login">
                            "Log in"
                        </a>
                    }
                })}
        </div>
    }
}
