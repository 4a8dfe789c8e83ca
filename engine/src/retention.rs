//! How long history is kept: a tenant's plan's `retention_days` (the default plan's, unless the
//! tenant's own sets it). A run family (a top-level run, its children and its continuations)
//! whose every run ended longer ago is deleted, a batch of families at a time with a pause
//! between batches, so the writes of live runs never queue long behind a delete. Every engine
//! does it once a minute ([`crate::Engine::start`]); `durable prune` does it, or says what it
//! would do, at once.

use std::time::Duration;

use crate::driver::plans::PlanSet;
use crate::model::{Millis, Namespace, Scope};
use crate::store::{Store, StoreResult};

/// Families deleted per statement.
pub const FAMILIES_PER_BATCH: u32 = 200;

/// The pause between two batches of one tenant.
pub const PAUSE: Duration = Duration::from_millis(20);

/// A day, in milliseconds.
const DAY_MS: Millis = 24 * 60 * 60 * 1000;

/// A tenant whose plan keeps history for `days`: its runs that ended before
/// `finished_before` are due for deletion.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expiry {
    /// The tenant.
    pub tenant: Namespace,
    /// How many days its history is kept.
    pub days: u32,
    /// Runs that ended before this are deleted.
    pub finished_before: Millis,
}

/// The tenants in `scope` that have runs and a retention, as of `now`.
pub async fn expiries(store: &dyn Store, scope: &Scope, now: Millis) -> StoreResult<Vec<Expiry>> {
    let plans: PlanSet = store.plans().await?.into_iter().collect();
    let mut tenants: Vec<Namespace> = store
        .run_counts(scope)
        .await?
        .into_iter()
        .map(|c| c.namespace)
        .collect();
    tenants.sort();
    tenants.dedup();
    Ok(tenants
        .into_iter()
        .filter_map(|tenant| {
            let days = plans.of(&tenant).retention_days?;
            Some(Expiry {
                finished_before: now.saturating_sub(i64::from(days).saturating_mul(DAY_MS)),
                tenant,
                days,
            })
        })
        .collect())
}

/// Deletes what `expiry` says is due, batch after batch until none is left or `go_on` says
/// to stop (a process shutting down); how many runs.
pub async fn prune(
    store: &dyn Store,
    expiry: &Expiry,
    go_on: impl Fn() -> bool,
) -> StoreResult<u64> {
    let mut deleted = 0;
    while go_on() {
        let n = store
            .prune_runs(&expiry.tenant, expiry.finished_before, FAMILIES_PER_BATCH)
            .await?;
        deleted += n;
        if n == 0 {
            return Ok(deleted);
        }
        tokio::time::sleep(PAUSE).await;
    }
    Ok(deleted)
}
