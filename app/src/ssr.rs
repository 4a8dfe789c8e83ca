//! Server-side plumbing shared by the server functions: the state they read, the session user,
//! the scoped store view, and password hashing.

use std::sync::Arc;

use argon2::Argon2;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use axum::extract::FromRef;
use durable::Engine;
use durable::model::Role;
use durable::store::{Accounts, ScopedStore, User};
use leptos::prelude::*;
use tower_sessions::Session;

use crate::{AppError, Me};

/// The session key holding the logged-in user's id.
pub const USER_KEY: &str = "user_id";

/// The session key holding the user's session epoch at login: "log out everywhere" moves the
/// user's epoch on, and every session holding an older one stops working.
pub const EPOCH_KEY: &str = "session_epoch";

/// What the server functions and routes share.
#[derive(Clone)]
pub struct AppState {
    /// Leptos' own options (site root, addresses).
    pub leptos_options: LeptosOptions,
    /// The engine: starts runs, owns the store.
    pub engine: Engine,
    /// Users and settings.
    pub accounts: Arc<dyn Accounts>,
}

impl FromRef<AppState> for LeptosOptions {
    fn from_ref(state: &AppState) -> Self {
        state.leptos_options.clone()
    }
}

/// The app state provided to every server function.
pub fn app_state() -> Result<AppState, AppError> {
    use_context::<AppState>().ok_or_else(|| {
        tracing::error!("AppState missing from the server function context");
        AppError::Internal
    })
}

/// Maps what the engine refused onto a form's error: the user's mistakes with the engine's
/// message (which names the fix), anything else as [`internal`].
pub fn engine_error(e: durable::EngineError) -> AppError {
    if e.is_callers() {
        AppError::Invalid(e.to_string())
    } else {
        internal(e)
    }
}

/// Logs a server-side failure and turns it into the generic [`AppError::Internal`].
pub fn internal(e: impl std::fmt::Display) -> AppError {
    tracing::error!(error = %e, "server function failed");
    AppError::Internal
}

/// The current request's session.
pub async fn session() -> Result<Session, AppError> {
    leptos_axum::extract::<Session>().await.map_err(internal)
}

/// The logged-in user of this request, or [`AppError::Unauthorized`].
pub async fn session_user() -> Result<User, AppError> {
    let state = app_state()?;
    user_of(state.accounts.as_ref(), &session().await?)
        .await?
        .ok_or(AppError::Unauthorized)
}

/// The logged-in user of this request if its role may act on runs (admin or operator), with
/// the app state; [`AppError::Forbidden`] for a viewer.
pub async fn acting_user() -> Result<(AppState, User), AppError> {
    let state = app_state()?;
    let user = session_user().await?;
    if !user.role.can_act() {
        return Err(AppError::Forbidden);
    }
    Ok((state, user))
}

/// The command that starts a worker for `tenant`'s steps: on a namespaced control plane every
/// queue is its namespace's own, so its workers are started with that namespace.
pub fn worker_command(state: &AppState, tenant: &str) -> String {
    match state.engine.namespace() {
        Some(ns) => format!("durable worker --namespace {ns}"),
        None => format!("durable worker --tenant {tenant}"),
    }
}

/// The live worker groups `scope` may see.
pub async fn live_workers(
    state: &AppState,
    scope: &durable::model::Scope,
) -> Result<Vec<durable::model::WorkerGroup>, AppError> {
    state
        .engine
        .transport()
        .worker_groups(scope)
        .await
        .map_err(internal)
}

/// The user `session` belongs to, if it is still valid: the user exists and nobody logged it
/// out everywhere since. An invalid session is emptied on the way. Used by the pages and by
/// the live event stream alike.
pub async fn user_of(accounts: &dyn Accounts, session: &Session) -> Result<Option<User>, AppError> {
    let Some(id) = session.get::<i64>(USER_KEY).await.map_err(internal)? else {
        return Ok(None);
    };
    let epoch = session.get::<i64>(EPOCH_KEY).await.map_err(internal)?;
    match accounts.user_by_id(id).await.map_err(internal)? {
        Some(user) if epoch.unwrap_or(0) == user.session_epoch => Ok(Some(user)),
        _ => {
            session.flush().await.map_err(internal)?;
            Ok(None)
        }
    }
}

/// The user as the pages show it.
pub fn me(user: &User) -> Me {
    Me {
        email: user.email.clone(),
        tenant: user.tenant.clone(),
        role: user.role,
    }
}

/// The store view this user may read: its tenant's namespace only, or everything for an
/// operator. This is the only way server functions read runs.
pub fn reads_for(state: &AppState, user: &User) -> Result<ScopedStore, AppError> {
    let store = state.engine.store().clone();
    match (&user.tenant, user.role) {
        (None, Role::Operator) => Ok(ScopedStore::operator(store)),
        (Some(tenant), _) => Ok(ScopedStore::new(store, tenant.clone())),
        (None, _) => {
            tracing::error!(user = %user.email, "a non-operator user has no tenant");
            Err(AppError::Forbidden)
        }
    }
}

/// Hashes a password with argon2id and a random salt (PHC string).
pub fn hash_password(password: &str) -> Result<String, argon2::password_hash::Error> {
    let salt = SaltString::generate(&mut rand::rngs::OsRng);
    Ok(Argon2::default()
        .hash_password(password.as_bytes(), &salt)?
        .to_string())
}

/// Checks a password against a PHC hash. A malformed hash never verifies.
pub fn verify_password(password: &str, hash: &str) -> bool {
    PasswordHash::new(hash)
        .map(|parsed| {
            Argon2::default()
                .verify_password(password.as_bytes(), &parsed)
                .is_ok()
        })
        .unwrap_or(false)
}

/// An argon2id hash of a random password nobody knows, checked for unknown emails so that login
/// timing does not reveal which emails exist.
pub fn dummy_hash() -> &'static str {
    static DUMMY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    DUMMY.get_or_init(|| {
        let random: [u8; 16] = rand::random();
        hash_password(&format!("{random:?}")).unwrap_or_default()
    })
}

/// Gives a failed server function the HTTP status its error deserves (4xx for the caller's
/// mistakes), for calls from the hydrated client. A plain HTML form post keeps Leptos'
/// redirect back to the form instead.
pub fn reply<T>(result: Result<T, AppError>) -> Result<T, AppError> {
    use axum::http::StatusCode;
    use axum::http::header::ACCEPT;

    if let Err(e) = &result {
        let plain_form = use_context::<axum::http::request::Parts>()
            .and_then(|p| {
                p.headers
                    .get(ACCEPT)
                    .and_then(|v| v.to_str().ok())
                    .map(|v| v.contains("text/html"))
            })
            .unwrap_or(false);
        if !plain_form && let Some(response) = use_context::<leptos_axum::ResponseOptions>() {
            response.set_status(match e {
                AppError::Unauthorized | AppError::BadCredentials => StatusCode::UNAUTHORIZED,
                AppError::Forbidden => StatusCode::FORBIDDEN,
                AppError::TooManyAttempts { .. } => StatusCode::TOO_MANY_REQUESTS,
                AppError::Invalid(_) => StatusCode::BAD_REQUEST,
                AppError::Internal | AppError::Transport(_) => StatusCode::INTERNAL_SERVER_ERROR,
            });
        }
    }
    result
}
