use leptos::prelude::*;
use leptos_meta::Title;

use crate::AppError;

/// Failed logins counted per email and per client address.
#[cfg(feature = "ssr")]
const LOGIN_WINDOW_MS: i64 = 15 * 60_000;
/// Failed logins for one email within the window before it is refused without checking.
#[cfg(feature = "ssr")]
const MAX_FAILURES_PER_EMAIL: u64 = 5;
/// Failed logins from one address within the window (several people may share one).
#[cfg(feature = "ssr")]
const MAX_FAILURES_PER_ADDRESS: u64 = 20;

/// Checks the credentials and starts a session (with a fresh session id). Failed logins are
/// counted in the database per email and per client address, so every dashboard process
/// enforces the same limit; over it, the attempt is refused before any password check.
#[server]
pub async fn login(email: String, password: String) -> Result<(), AppError> {
    crate::ssr::reply(
        async move {
            use crate::ssr::{
                EPOCH_KEY, USER_KEY, app_state, dummy_hash, internal, session, verify_password,
            };

            let state = app_state()?;
            let email = email.trim().to_lowercase();
            if email.is_empty() || password.is_empty() {
                return Err(AppError::Invalid("enter your email and password".into()));
            }
            use durable::runtime::{Clock, SystemClock};
            let now = SystemClock.now();
            let email_key = format!("email:{email}");
            let address = leptos_axum::extract::<
                axum::extract::ConnectInfo<std::net::SocketAddr>,
            >()
            .await
            .ok()
            .map(|c| format!("ip:{}", c.0.ip()));
            let since = now - LOGIN_WINDOW_MS;
            let accounts = &state.accounts;
            let by_email = accounts
                .login_failures(std::slice::from_ref(&email_key), since)
                .await
                .map_err(internal)?;
            let by_address = match &address {
                Some(a) => accounts
                    .login_failures(std::slice::from_ref(a), since)
                    .await
                    .map_err(internal)?,
                None => 0,
            };
            if by_email >= MAX_FAILURES_PER_EMAIL || by_address >= MAX_FAILURES_PER_ADDRESS {
                tracing::warn!(%email, address = address.as_deref().unwrap_or("-"), "login refused: too many failures");
                return Err(AppError::TooManyAttempts {
                    retry_after_minutes: (LOGIN_WINDOW_MS / 60_000) as u32,
                });
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
                _ => {
                    let keys: Vec<String> = std::iter::once(email_key).chain(address).collect();
                    accounts
                        .record_login_failure(&keys, now)
                        .await
                        .map_err(internal)?;
                    return Err(AppError::BadCredentials);
                }
            };
            accounts
                .clear_login_failures(&email_key)
                .await
                .map_err(internal)?;
            let session = session().await?;
            session.cycle_id().await.map_err(internal)?;
            session.insert(USER_KEY, user.id).await.map_err(internal)?;
            session
                .insert(EPOCH_KEY, user.session_epoch)
                .await
                .map_err(internal)?;
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
