//! API tokens as an operator or a tenant admin sees them: named, scoped, maybe expiring,
//! revocable one by one. The secret is shown once, when the token is issued, and kept only as a
//! hash.

use serde::{Deserialize, Serialize};

use super::{Millis, Namespace};

/// What a token may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TokenScope {
    /// Read its tenant's runs and events.
    Read,
    /// Read, start and act on its tenant's runs.
    ReadWrite,
    /// Read and set every tenant's plan; no tenant's runs.
    Operator,
}

impl TokenScope {
    /// The scope as stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            TokenScope::Read => "read",
            TokenScope::ReadWrite => "read-write",
            TokenScope::Operator => "operator",
        }
    }
}

impl std::str::FromStr for TokenScope {
    type Err = String;

    fn from_str(raw: &str) -> Result<Self, String> {
        match raw {
            "read" => Ok(TokenScope::Read),
            "read-write" => Ok(TokenScope::ReadWrite),
            "operator" => Ok(TokenScope::Operator),
            other => Err(format!(
                "`{other}` is not a token scope: use read or read-write (operator tokens come from `durable token issue --operator`)"
            )),
        }
    }
}

/// An issued API token, without its secret.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiToken {
    /// The token's public id (the part before its secret).
    pub id: String,
    /// The tenant it acts for; `None` for an operator token.
    pub tenant: Option<Namespace>,
    /// What its holder calls it ("ci", "billing-service").
    pub name: String,
    /// What it may do.
    pub scope: TokenScope,
    /// When it was issued.
    pub created_at: Millis,
    /// When it stops working by itself, if ever.
    pub expires_at: Option<Millis>,
    /// When it was revoked, if it was.
    pub revoked_at: Option<Millis>,
}

impl ApiToken {
    /// A name a token may have, trimmed: 1 to 100 characters without control characters.
    pub fn check_name(raw: &str) -> Result<&str, String> {
        let name = raw.trim();
        if name.is_empty() || name.chars().count() > 100 || name.chars().any(char::is_control) {
            return Err(
                "a token's name must be 1 to 100 characters without control characters".into(),
            );
        }
        Ok(name)
    }

    /// Whether it works at `now`: not revoked, not expired.
    pub fn is_live(&self, now: Millis) -> bool {
        self.revoked_at.is_none() && self.expires_at.is_none_or(|at| now < at)
    }
}
