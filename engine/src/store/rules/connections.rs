//! Connections: a stored kind read back, and whether a write finds the revision it read.

use crate::model::ConnectionKind;
use crate::store::{StoreError, StoreResult};

/// A stored kind read back.
pub(crate) fn kind(raw: &str) -> StoreResult<ConnectionKind> {
    match raw {
        "http" => Ok(ConnectionKind::Http),
        "secret" => Ok(ConnectionKind::Secret),
        other => Err(StoreError::Corrupt(format!("connection kind `{other}`"))),
    }
}

/// Whether a write that read revision `read` (0: none) finds the stored one (`stored`) there.
pub(crate) fn still_at(stored: Option<i64>, read: i64) -> bool {
    stored.unwrap_or(0) == read
}
