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

/// The session key holding when the user logged in (ms since the epoch): a session ends
/// [`SESSION_LIFETIME_MS`] after it, however active.
pub const LOGGED_IN_AT_KEY: &str = "logged_in_at";

/// The longest a session lasts from its login, active or not (idle ones end sooner): a stolen
/// session cookie stops working within a day.
pub const SESSION_LIFETIME_MS: i64 = 24 * 3_600_000;

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

/// The user `session` belongs to, if it is still valid: the user exists and is not disabled,
/// nobody logged it out everywhere since, and its login is less than [`SESSION_LIFETIME_MS`]
/// old. An invalid
/// session is emptied on the way. Used by the pages and by the live event stream alike.
pub async fn user_of(accounts: &dyn Accounts, session: &Session) -> Result<Option<User>, AppError> {
    use durable::runtime::{Clock, SystemClock};

    let Some(id) = session.get::<i64>(USER_KEY).await.map_err(internal)? else {
        return Ok(None);
    };
    let epoch = session.get::<i64>(EPOCH_KEY).await.map_err(internal)?;
    let logged_in_at = session
        .get::<i64>(LOGGED_IN_AT_KEY)
        .await
        .map_err(internal)?;
    let fresh = logged_in_at.is_some_and(|at| SystemClock.now() - at < SESSION_LIFETIME_MS);
    match accounts.user_by_id(id).await.map_err(internal)? {
        Some(user) if fresh && !user.disabled && epoch.unwrap_or(0) == user.session_epoch => {
            Ok(Some(user))
        }
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use durable::model::Role;
    use durable::runtime::{Clock, SystemClock};
    use durable::store::NewUser;
    use durable::testing::TwoTenants;
    use tower_sessions::{MemoryStore, Session};

    use super::*;

    #[tokio::test]
    async fn a_session_ends_a_day_after_its_login_however_active() {
        let world = TwoTenants::new().await;
        let accounts: &dyn Accounts = world.sqlite.as_ref();
        let user = accounts
            .create_user(
                NewUser {
                    email: "ada@acme.test".into(),
                    tenant: None,
                    role: Role::Operator,
                    password_hash: "x".into(),
                },
                0,
            )
            .await
            .expect("user");
        let now = SystemClock.now();
        for (logged_in_at, valid) in [
            (Some(now - 3_600_000), true),
            (Some(now - SESSION_LIFETIME_MS - 1), false),
            // A session from before logins were stamped.
            (None, false),
        ] {
            let session = Session::new(None, Arc::new(MemoryStore::default()), None);
            session.insert(USER_KEY, user.id).await.expect("insert");
            session.insert(EPOCH_KEY, 0i64).await.expect("insert");
            if let Some(at) = logged_in_at {
                session.insert(LOGGED_IN_AT_KEY, at).await.expect("insert");
            }
            let seen = user_of(accounts, &session).await.expect("read");
            assert_eq!(seen.is_some(), valid, "logged in at {logged_in_at:?}");
        }
        world.stop().await;
    }
}
