use async_trait::async_trait;

use super::{ApiTokens, StoreResult};
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
    /// Bumped by "log out everywhere": a session made at another epoch is no longer valid.
    pub session_epoch: i64,
    /// An operator disabled the account: it cannot log in.
    pub disabled: bool,
}

/// What an operator changes about an account; every change also ends its sessions.
#[derive(Clone, Debug, Default)]
pub struct AccountChange {
    /// A new PHC-format password hash.
    pub password_hash: Option<String>,
    /// Disable (`true`) or enable (`false`) the account.
    pub disabled: Option<bool>,
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

/// A key failed logins are counted under (`email:…`, `ip:…`) and how many it allows in the
/// window before attempts are refused unchecked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoginLimit {
    /// What the failures are counted by.
    pub key: String,
    /// Failures in the window at which further attempts are refused.
    pub allowed: u64,
}

/// What [`Accounts::reserve_login_attempt`] decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reservation {
    /// A failure is reserved under every key: check the password.
    Reserved,
    /// This key has used up its failures in the window; nothing was reserved.
    Refused {
        /// The key over its limit.
        key: String,
    },
}

/// Dashboard users, API tokens and server settings, kept in the same database as the runs.
#[async_trait]
pub trait Accounts: ApiTokens + Send + Sync + 'static {
    /// Adds a user; [`super::StoreError::Conflict`] when the email is taken.
    async fn create_user(&self, user: NewUser, now: Millis) -> StoreResult<User>;
    /// Looks a user up by email.
    async fn user_by_email(&self, email: &str) -> StoreResult<Option<User>>;
    /// Looks a user up by id.
    async fn user_by_id(&self, id: i64) -> StoreResult<Option<User>>;
    /// Applies `change` to user `email` and moves its session epoch on, so every session it
    /// has ends; the user as it is now, or `None` when no such user exists.
    async fn change_account(&self, email: &str, change: AccountChange)
    -> StoreResult<Option<User>>;
    /// How many users exist (first start creates the demo ones when there are none).
    async fn count_users(&self) -> StoreResult<u64>;
    /// Ends every session of user `id` ("log out everywhere") by moving its session epoch on;
    /// returns the new epoch, or `None` when no such user exists.
    async fn bump_session_epoch(&self, id: i64) -> StoreResult<Option<i64>>;
    /// Reserves a failed login under each of `limits`' keys at `now`, before the password is
    /// checked, unless a key already counts `allowed` failures at or after `since`: then
    /// nothing is written and the first such key is named. Count and reservation are one
    /// atomic step across every process on this database, so parallel attempts cannot all pass
    /// the count before any is recorded. The reservation stands as the failure unless
    /// [`Accounts::release_login_attempt`] takes it back. Failures older than a day are dropped
    /// on the way.
    async fn reserve_login_attempt(
        &self,
        attempt: &str,
        limits: &[LoginLimit],
        since: Millis,
        now: Millis,
    ) -> StoreResult<Reservation>;
    /// Takes back what [`Accounts::reserve_login_attempt`] reserved under `attempt`: the
    /// password was right, or never checked.
    async fn release_login_attempt(&self, attempt: &str) -> StoreResult<()>;
    /// Forgets the failed logins under `key` (after a successful login).
    async fn clear_login_failures(&self, key: &str) -> StoreResult<()>;
    /// Reads a setting, if one is stored under `key`.
    async fn setting(&self, key: &str) -> StoreResult<Option<String>>;
    /// Reads a setting, or stores `make()` under `key` if it has none yet. Concurrent callers
    /// all see the first value stored.
    async fn setting_or_insert(&self, key: &str, make: String) -> StoreResult<String>;
}
