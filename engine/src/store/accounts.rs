use async_trait::async_trait;

use super::StoreResult;
use crate::model::{Millis, Namespace, Role};

/// A dashboard user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    /// Row id.
    pub id: i64,
    /// Login name.
    pub email: String,
    /// The tenant it belongs to; `None` for an operator.
    pub tenant: Option<Namespace>,
    /// What it may do.
    pub role: Role,
    /// PHC-format password hash.
    pub password_hash: String,
}

/// A user to create.
#[derive(Clone, Debug)]
pub struct NewUser {
    /// Login name.
    pub email: String,
    /// Tenant (`None` only for an operator).
    pub tenant: Option<Namespace>,
    /// Role.
    pub role: Role,
    /// PHC-format password hash (never the password).
    pub password_hash: String,
}

/// Dashboard users and server settings, kept in the same database as the runs.
#[async_trait]
pub trait Accounts: Send + Sync + 'static {
    /// Adds a user; [`super::StoreError::Conflict`] when the email is taken.
    async fn create_user(&self, user: NewUser, now: Millis) -> StoreResult<User>;
    /// Looks a user up by email.
    async fn user_by_email(&self, email: &str) -> StoreResult<Option<User>>;
    /// Looks a user up by id.
    async fn user_by_id(&self, id: i64) -> StoreResult<Option<User>>;
    /// How many users exist (first start creates the demo ones when there are none).
    async fn count_users(&self) -> StoreResult<u64>;
    /// Reads a setting, or stores `make()` under `key` if it has none yet. Concurrent callers
    /// all see the first value stored.
    async fn setting_or_insert(&self, key: &str, make: String) -> StoreResult<String>;
}
