use leptos::prelude::*;
use leptos_meta::Title;

use crate::AppError;

/// Checks the credentials and starts a session (with a fresh session id).
#[server]
pub async fn login(email: String, password: String) -> Result<(), AppError> {
    crate::ssr::reply(
        async move {
            use crate::ssr::{USER_KEY, app_state, dummy_hash, internal, session, verify_password};

            let state = app_state()?;
            let email = email.trim().to_lowercase();
            if email.is_empty() || password.is_empty() {
                return Err(AppError::Invalid("enter your email and password".into()));
            }
            let user = state
                .accounts
                .user_by_email(&email)
                .await
                .map_err(internal)?;
            // Verify against a real hash even for unknown emails, so timing does not reveal them.
            let (hash, user) = match user {
                Some(u) => (u.password_hash.clone(), Some(u)),
                None => (dummy_hash().to_owned(), None),
            };
            let ok = tokio::task::spawn_blocking(move || verify_password(&password, &hash))
                .await
                .map_err(internal)?;
            let user = match (ok, user) {
                (true, Some(user)) => user,
                _ => return Err(AppError::BadCredentials),
            };
            let session = session().await?;
            session.cycle_id().await.map_err(internal)?;
            session.insert(USER_KEY, user.id).await.map_err(internal)?;
            tracing::info!(user = %user.email, "logged in");
            leptos_axum::redirect("/");
            Ok(())
        }
        .await,
    )
}

/// The login screen.
#[component]
pub fn LoginPage() -> impl IntoView {
    let login = ServerAction::<Login>::new();
    let error = move || {
        login
            .value()
            .get()
            .and_then(|r| r.err())
            .map(|e| e.to_string())
    };
    view! {
        <Title text="Log in · durable" />
        <main class="flex min-h-screen items-center justify-center px-4">
            <div class="w-full max-w-sm rounded-xl border border-slate-200 bg-white p-6 shadow-sm">
                <h1 class="text-xl font-semibold">"Log in to durable"</h1>
                <p class="mt-1 text-sm text-slate-600">
                    "Use the account your operator gave you."
                </p>
                <ActionForm action=login>
                    <div class="mt-4 flex flex-col gap-3">
                        <label class="text-sm font-medium" for="email">
                            "Email"
                        </label>
                        <input
                            id="email"
                            name="email"
                            type="email"
                            required
                            autofocus
                            autocomplete="username"
                            class="rounded-md border border-slate-300 px-3 py-2 focus:outline-none focus:ring-2 focus:ring-indigo-500"
                        />
                        <label class="text-sm font-medium" for="password">
                            "Password"
                        </label>
                        <input
                            id="password"
                            name="password"
                            type="password"
                            required
                            autocomplete="current-password"
                            class="rounded-md border border-slate-300 px-3 py-2 focus:outline-none focus:ring-2 focus:ring-indigo-500"
                        />
                        <Show when=move || error().is_some()>
                            <p class="text-sm text-red-700" role="alert" data-testid="login-error">
                                {error}
                            </p>
                        </Show>
                        <button
                            type="submit"
                            class="mt-2 rounded-md bg-indigo-700 px-3 py-2 font-medium text-white hover:bg-indigo-800 focus:outline-none focus:ring-2 focus:ring-indigo-500 focus:ring-offset-2 disabled:opacity-60"
                            disabled=move || login.pending().get()
                        >
                            {move || if login.pending().get() { "Logging in…" } else { "Log in" }}
                        </button>
                    </div>
                </ActionForm>
            </div>
        </main>
    }
}
