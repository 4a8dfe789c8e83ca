use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

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
