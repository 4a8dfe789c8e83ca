//! Who is asking on the dashboard: the session's user, read afresh on every request, so a
//! session logged out everywhere or of a deleted user stops working at once.

use durable::store::{Accounts, User};
use tower_sessions::Session;

use super::{app_state, internal};
use crate::{AppError, Me};

/// The session key holding the logged-in user's id.
pub const USER_KEY: &str = "user_id";

/// The session key holding the user's session epoch at login: "log out everywhere" moves the
/// user's epoch on, and every session holding an older one stops working.
pub const EPOCH_KEY: &str = "session_epoch";

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
