//! Pools and connections: how many a tenant may hold, and what a put keeps of the pool it
//! replaces.

use crate::model::{Millis, Pool};
use crate::store::{StoreError, StoreResult};

/// Refuses a new pool (or connection: `what`, bounded by the plan's `ceiling`) of a tenant that
/// holds `held` already, `max` being allowed.
pub(crate) fn room_for_one_more(
    held: i64,
    max: usize,
    what: &str,
    ceiling: &str,
) -> StoreResult<()> {
    if held >= max as i64 {
        return Err(StoreError::Refused(format!(
            "the tenant already has {held} {what}, the most its plan allows ({ceiling}); delete one first"
        )));
    }
    Ok(())
}

/// Refuses a pool of a tenant's own by the name of a shared pool granted to it: both would be
/// the partition `<tenant>.<name>`.
pub(crate) fn granted_name(name: &str) -> StoreError {
    StoreError::Refused(format!(
        "`{name}` is the name of a shared pool granted to the tenant; pick another name for a pool of its own"
    ))
}

/// `pool` as a put stores it: a pool that existed (created at `created_at`) keeps that time.
pub(crate) fn as_stored(pool: &Pool, created_at: Option<Millis>) -> Pool {
    Pool {
        created_at: created_at.unwrap_or(pool.created_at),
        ..pool.clone()
    }
}
