//! Server-side plumbing shared by the server functions: the state they read, the session user,
//! the one view of runs a session may reach, password hashing, and the charts drawn as SVG.
//!
//! Runs are reached only through a [`SessionView`], built in one place from the session's user
//! ([`view`]); the engine inside [`AppState`] is private to that module, so a server function
//! cannot read or act on the unscoped store by accident.

pub mod charts;
mod password;
mod policy;
mod reply;
mod session;
mod view;

pub use password::{PasswordChecks, hash_password};
pub use policy::{page_policy, send_page_policy};
pub use reply::{engine_error, internal, reply, store_error};
pub use session::{
    EPOCH_KEY, LOGGED_IN_AT_KEY, SESSION_LIFETIME_MS, USER_KEY, me, session, session_user, user_of,
};
pub use view::{AppState, Need, SessionView, ViewRefused, app_state, session_scope};

/// The key the failed logins of `email` are counted under: the login form's limit and
/// `durable user unlock|passwd`, which clear it, must agree on it.
pub fn login_failures_key(email: &str) -> String {
    format!("email:{email}")
}
