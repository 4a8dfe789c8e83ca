//! Updates: a message to a running workflow that its handler accepts or refuses, with a reply.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The id an update is kept under with its run. A caller that repeats an update under the same
/// id (after a timeout, or a restart of the server it asked) gets the reply stored the first
/// time, and the run receives the update once.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct UpdateId(String);

/// The longest update id.
pub const MAX_UPDATE_ID_CHARS: usize = 128;

impl UpdateId {
    /// Checks the shape of an update id from a header, a flag or a body: 1 to 128 letters,
    /// digits, `_`, `-`, `.` or `:`.
    pub fn parse(raw: &str) -> Result<Self, UpdateIdError> {
        if plain_token(raw, MAX_UPDATE_ID_CHARS) {
            Ok(UpdateId(raw.to_owned()))
        } else {
            Err(UpdateIdError(raw.chars().take(140).collect()))
        }
    }

    /// A fresh id, for an update whose caller named none.
    #[cfg(feature = "engine")]
    pub fn random() -> Self {
        UpdateId(format!("upd_{}", uuid::Uuid::new_v4().simple()))
    }

    /// The id as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Whether `raw` is 1 to `max` letters, digits, `_`, `-`, `.` or `:`: the shape of the ids a
/// caller chooses to make a request idempotent.
pub(crate) fn plain_token(raw: &str, max: usize) -> bool {
    (1..=max).contains(&raw.len())
        && raw
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':'))
}

impl TryFrom<String> for UpdateId {
    type Error = UpdateIdError;
    fn try_from(raw: String) -> Result<Self, Self::Error> {
        UpdateId::parse(&raw)
    }
}

impl From<UpdateId> for String {
    fn from(id: UpdateId) -> Self {
        id.0
    }
}

impl fmt::Display for UpdateId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// An update id of the wrong shape.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{0}` is not an update id: use 1 to 128 letters, digits, `_`, `-`, `.` or `:` (or leave it out for a fresh one)"
)]
pub struct UpdateIdError(pub String);

/// An update its handler accepted: what the store keeps, and delivers to the run as signal
/// `name` carrying `argument`.
#[derive(Clone, Debug, PartialEq)]
pub struct AcceptedUpdate {
    /// Its id.
    pub id: UpdateId,
    /// The handler's (and the delivered signal's) name.
    pub name: String,
    /// What the caller sent.
    pub argument: Value,
    /// What the handler answered.
    pub reply: Value,
}

/// An update kept with its run: the handler it went to and the reply it got.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StoredUpdate {
    /// The handler's name.
    pub name: String,
    /// The reply.
    pub reply: Value,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn update_ids_are_short_plain_tokens() {
        assert!(UpdateId::parse("req-42:approve.1").is_ok());
        for bad in ["", "a b", "ü", &"x".repeat(129)] {
            assert!(UpdateId::parse(bad).is_err(), "{bad:?}");
        }
    }
}
