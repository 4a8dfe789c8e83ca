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

/// The longest email a login looks up (RFC 5321's limit on a path); longer is a typo or abuse.
#[cfg(feature = "ssr")]
const MAX_EMAIL_CHARS: usize = 254;
/// The longest password checked: argon2 reads all of it.
#[cfg(feature = "ssr")]
const MAX_PASSWORD_BYTES: usize = 1024;

/// Checks the credentials and starts a session (with a fresh session id). Before the password
/// is checked, a failure is reserved in the database under the email and under the client
/// address, in one atomic step that every dashboard process shares: over either limit the
/// attempt is refused unchecked, and parallel attempts cannot all pass the count before any is
/// recorded. A right password takes its reservation back. Checks then wait for one of a few
/// slots ([`crate::ssr::PasswordChecks`]); with the line full, the login is turned away at
/// once.
#[server]
pub async fn login(email: String, password: String) -> Result<(), AppError> {
    crate::ssr::reply(
        async move {
            use crate::ssr::{EPOCH_KEY, LOGGED_IN_AT_KEY, USER_KEY, app_state, internal, session};
            use durable::store::{LoginLimit, Reservation};

            let state = app_state()?;
            let email = email.trim().to_lowercase();
            if email.is_empty() || password.is_empty() {
                return Err(AppError::Invalid("enter your email and password".into()));
            }
            if email.chars().count() > MAX_EMAIL_CHARS || email.chars().any(char::is_control) {
                return Err(AppError::Invalid(format!(
                    "that is not an email address: use at most {MAX_EMAIL_CHARS} characters and no control characters"
                )));
            }
            if password.len() > MAX_PASSWORD_BYTES {
                return Err(AppError::Invalid(format!(
                    "passwords are at most {MAX_PASSWORD_BYTES} bytes"
                )));
            }
            use durable::runtime::{Clock, SystemClock};
            let now = SystemClock.now();
            let email_key = crate::ssr::login_failures_key(&email);
            let address = leptos_axum::extract::<
                axum::extract::ConnectInfo<std::net::SocketAddr>,
            >()
            .await
            .ok()
            .map(|c| format!("ip:{}", c.0.ip()));
            let mut limits = vec![LoginLimit {
                key: email_key.clone(),
                allowed: MAX_FAILURES_PER_EMAIL,
            }];
            limits.extend(address.iter().map(|key| LoginLimit {
                key: key.clone(),
                allowed: MAX_FAILURES_PER_ADDRESS,
            }));
            let attempt = format!("{:032x}", rand::random::<u128>());
            let accounts = &state.accounts;
            let reserved = accounts
                .reserve_login_attempt(&attempt, &limits, now - LOGIN_WINDOW_MS, now)
                .await
                .map_err(internal)?;
            if let Reservation::Refused { key } = reserved {
                tracing::warn!(%email, %key, "login refused: too many failures");
                return Err(AppError::TooManyAttempts {
                    retry_after_minutes: (LOGIN_WINDOW_MS / 60_000) as u32,
                });
            }
            // From here the reservation counts as a failure unless taken back.
            let user = match accounts.user_by_email(&email).await {
                Ok(user) => user,
                Err(e) => {
                    release(accounts.as_ref(), &attempt).await;
                    return Err(internal(e));
                }
            };
            // An unknown email is checked against a dummy hash, so timing does not reveal it.
            let hash = user.as_ref().map(|u| u.password_hash.clone());
            let Some(ok) = state.passwords.verify(password, hash).await else {
                release(accounts.as_ref(), &attempt).await;
                tracing::warn!(%email, "login turned away: too many password checks waiting");
                return Err(AppError::Busy);
            };
            let user = match (ok, user) {
                (true, Some(user)) => user,
                _ => return Err(AppError::BadCredentials),
            };
            if user.disabled {
                // Said only to whoever knows the password; it counts as a failure.
                return Err(AppError::AccountDisabled);
            }
            release(accounts.as_ref(), &attempt).await;
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
            session
                .insert(LOGGED_IN_AT_KEY, now)
                .await
                .map_err(internal)?;
            tracing::info!(user = %user.email, "logged in");
            leptos_axum::redirect("/");
            Ok(())
        }
        .await,
    )
}

/// Takes back a login's reserved failure: its password was right, or never checked. A
/// reservation left behind by a failure here only counts against the limit, never for it.
#[cfg(feature = "ssr")]
async fn release(accounts: &dyn durable::store::Accounts, attempt: &str) {
    if let Err(e) = accounts.release_login_attempt(attempt).await {
        tracing::warn!(error = %e, "could not take back a login's reserved failure");
    }
}

/// The login screen.
#[component]
pub fn LoginPage() -> impl IntoView {
    let login = ServerAction::<Login>::new();
    let posted =
        crate::error::posted_form_error(Some(<Login as leptos::server_fn::ServerFn>::PATH));
    let error = move || {
        login
            .value()
            .get()
            .and_then(|r| r.err())
            .map(|e| e.to_string())
            .or_else(posted)
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
