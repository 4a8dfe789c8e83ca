use std::fmt;
use std::str::FromStr;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::StoreResult;
use crate::model::{Millis, Namespace};

/// What a dashboard user may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Reads its tenant's runs.
    Viewer,
    /// Reads and acts on its tenant's runs.
    Admin,
    /// Reads and acts on every namespace.
    Operator,
}

impl Role {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Admin => "admin",
            Role::Operator => "operator",
        }
    }

    /// Whether this role may start, cancel, signal or retry runs.
    pub fn can_act(self) -> bool {
        matches!(self, Role::Admin | Role::Operator)
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Role {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "viewer" => Ok(Role::Viewer),
            "admin" => Ok(Role::Admin),
            "operator" => Ok(Role::Operator),
            other => Err(format!(
                "unknown role `{other}`: use viewer, admin or operator"
            )),
        }
    }
}

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
