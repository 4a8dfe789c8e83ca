use std::fmt;

use serde::{Deserialize, Serialize};

/// The id of a run. Top-level runs get a time-ordered `run_<uuid v7>`; child runs are
/// `<parent>.child.<seq>` so that a replayed parent finds the child it already started.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct RunId(String);

/// Why a string is not a run id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a run id: use 1 to 200 characters of letters, digits, `_`, `-`, `.` or `:`")]
pub struct RunIdError(pub String);

impl RunId {
    /// Checks the shape of a run id taken from a URL, a form or a message.
    pub fn parse(raw: &str) -> Result<Self, RunIdError> {
        let ok = !raw.is_empty()
            && raw.len() <= 200
            && raw
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':'));
        if ok {
            Ok(RunId(raw.to_owned()))
        } else {
            Err(RunIdError(raw.chars().take(64).collect()))
        }
    }

    /// A fresh, time-ordered id for a top-level run.
    #[cfg(feature = "engine")]
    pub fn generate() -> Self {
        RunId(format!("run_{}", uuid::Uuid::now_v7().simple()))
    }

    /// The id as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for RunId {
    type Error = RunIdError;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        RunId::parse(&value)
    }
}

impl From<RunId> for String {
    fn from(value: RunId) -> Self {
        value.0
    }
}
