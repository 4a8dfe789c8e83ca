use leptos::prelude::*;
use leptos_router::components::Outlet;

use super::live::provide_live;
use crate::{AppError, Me};

/// The logged-in user.
#[server]
pub async fn current_user() -> Result<Me, AppError> {
    crate::ssr::reply(
        async move {
            let user = crate::ssr::session_user().await?;
            Ok(crate::ssr::me(&user))
        }
        .await,
    )
}

/// Ends the session.
#[server]
pub async fn logout() -> Result<(), AppError> {
    crate::ssr::reply(
        async move {
            let session = crate::ssr::session().await?;
            session.flush().await.map_err(crate::ssr::internal)?;
            leptos_axum::redirect("/login");
            Ok(())
        }
        .await,
    )
}

/// The frame of every logged-in screen: header with who is logged in, the live feed, the page.
#[component]
pub fn Layout() -> impl IntoView {
    let live = provide_live();
    let me = Resource::new(|| (), |_| current_user());
    let logout = ServerAction::<Logout>::new();
    view! {
        <header class="border-b border-slate-200 bg-white">
            <div class="mx-auto flex max-w-6xl flex-wrap items-center gap-x-4 gap-y-2 px-4 py-3">
                <a href="/" class="text-lg font-semibold tracking-tight text-indigo-700">
                    "durable"
                </a>
                <span
                    class="text-xs text-slate-500"
                    title="live updates"
                    data-testid="live-indicator"
                >
                    {move || if live.connected.get() { "● live" } else { "○ connecting" }}
                </span>
                <div class="ml-auto flex items-center gap-3 text-sm">
                    <Suspense fallback=|| ()>
                        {move || {
                            me.get()
                                .map(|m| match m {
                                    Ok(me) => view! { <WhoAmI me /> }.into_any(),
                                    Err(_) => {
                                        view! {
                                            <a class="text-indigo-700 underline" href="/login">
                                                "Log in"
                                            </a>
                                        }
                                            .into_any()
                                    }
                                })
                        }}
                    </Suspense>
                    <ActionForm action=logout>
                        <button
                            type="submit"
                            class="rounded-md border border-slate-300 px-2 py-1 text-slate-700 hover:bg-slate-100 focus:outline-none focus:ring-2 focus:ring-indigo-500"
                        >
                            "Log out"
                        </button>
                    </ActionForm>
                </div>
            </div>
        </header>
        <main class="mx-auto max-w-6xl px-4 py-6">
            <Outlet />
        </main>
    }
}

#[component]
fn WhoAmI(me: Me) -> impl IntoView {
    let scope = match &me.tenant {
        Some(t) => format!("tenant {t}"),
        None => "operator · all namespaces".to_owned(),
    };
    view! {
        <span class="text-slate-700" data-testid="me-email">
            {me.email}
        </span>
        <span
            class="rounded bg-indigo-50 px-2 py-0.5 text-xs text-indigo-800"
            data-testid="me-scope"
        >
            {scope}
            " · "
            {me.role.as_str()}
        </span>
    }
}
