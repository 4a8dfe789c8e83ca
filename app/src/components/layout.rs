use crate::data;
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

/// Ends every session of the logged-in user, on every device, this one included.
#[server]
pub async fn logout_everywhere() -> Result<(), AppError> {
    crate::ssr::reply(
        async move {
            use crate::ssr::{app_state, internal, session, session_user};

            let state = app_state()?;
            let user = session_user().await?;
            state
                .accounts
                .bump_session_epoch(user.id)
                .await
                .map_err(internal)?;
            session().await?.flush().await.map_err(internal)?;
            tracing::info!(user = %user.email, "logged out everywhere");
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
    let me = data::resource(|| (), |_| current_user());
    let logout = ServerAction::<Logout>::new();
    let logout_everywhere = ServerAction::<LogoutEverywhere>::new();
    let posted = crate::error::posted_form_error(None);
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
                <div class="ml-auto flex flex-wrap items-center justify-end gap-x-3 gap-y-1 text-sm">
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
                    <ActionForm action=logout_everywhere>
                        <button
                            type="submit"
                            class="rounded-md px-2 py-1 text-slate-600 underline hover:text-slate-900 focus:outline-none focus:ring-2 focus:ring-indigo-500"
                            title="End every session of this account, on every device"
                            data-testid="logout-everywhere"
                        >
                            "Log out everywhere"
                        </button>
                    </ActionForm>
                </div>
            </div>
        </header>
        <main class="mx-auto max-w-6xl px-4 py-6">
            {move || posted().map(|e| view! {
                <p class="mb-4 rounded-md bg-red-50 p-3 text-sm text-red-800" role="alert" data-testid="form-error">{e}</p>
            })}
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
    let operator = me.is_operator();
    let tenant_admin = me.role == durable::model::Role::Admin && me.tenant.is_some();
    view! {
        <a class="text-indigo-700 hover:underline" href="/schedules" data-testid="nav-schedules">
            "Schedules"
        </a>
        <a class="text-indigo-700 hover:underline" href="/pools" data-testid="nav-pools">
            "Pools"
        </a>
        <a class="text-indigo-700 hover:underline" href="/routing" data-testid="nav-routing">
            "Routing"
        </a>
        <a class="text-indigo-700 hover:underline" href="/connections" data-testid="nav-connections">
            "Connections"
        </a>
        {tenant_admin
            .then(|| {
                view! {
                    <a class="text-indigo-700 hover:underline" href="/tokens" data-testid="nav-tokens">
                        "API tokens"
                    </a>
                }
            })}
        {operator
            .then(|| {
                view! {
                    <a class="text-indigo-700 hover:underline" href="/operator" data-testid="nav-operator">
                        "Operator view"
                    </a>
                }
            })}
        <span class="hidden text-slate-700 sm:inline" data-testid="me-email">
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
