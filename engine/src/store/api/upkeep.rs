//! The sweep's writes: burying runs their drivers abandoned, un-parking blocked runs, folding
//! the run counts, and keeping the activity minutes.

use crate::model::{Millis, Run, Scope, StepTally};
use crate::store::StoreResult;
use async_trait::async_trait;

/// Ends abandoned runs and wakes parked ones; run by the sweep, never on a request.
#[async_trait]
pub trait Upkeep: Send + Sync + 'static {
    /// Ends runs their drivers abandoned: a `running` run whose lease expired after
    /// `max_recoveries` recoveries becomes `dead`, and a `cancelling` run whose driver is gone
    /// becomes `cancelled`. Their parents are settled. Returns the runs it ended.
    async fn sweep_abandoned(
        &self,
        scope: &Scope,
        max_recoveries: u32,
        now: Millis,
    ) -> StoreResult<Vec<Run>>;

    /// Moves `blocked` runs in `scope` whose recheck time (`wake_at`) has passed back to
    /// `pending`, so their next turn looks again at what parked them: a dispatch no live worker
    /// could take. They keep their reason, so that turn can tell a recheck (and stay quiet if
    /// it parks them again). Runs parked with no recheck time (an unserved version) stay
    /// parked.
    async fn wake_blocked(&self, scope: &Scope, now: Millis) -> StoreResult<Vec<Run>>;

    /// Un-parks `blocked` runs in `scope` whose `(workflow, version)` is in `served` (a process
    /// that runs them has started): they go back to `pending`. Returns them. Runs with a recheck
    /// time are left to [`Store::wake_blocked`]: a served version does not help them.
    async fn unblock_runs(
        &self,
        scope: &Scope,
        served: &[(String, u32)],
        now: Millis,
    ) -> StoreResult<Vec<Run>>;

    /// Folds the run counts' pending deltas into their totals, so reading them stays cheap. A
    /// store that keeps its totals in place (SQLite's one writer) has nothing to fold; where
    /// many processes write, one folds at a time and the others return at once.
    async fn fold_counts(&self) -> StoreResult<()>;

    /// Adds step results, counted by tenant, minute and run-time slot, to the activity minutes
    /// (each tenant's and every tenant's together). Additive, so each engine adds what it
    /// recorded and the minutes hold the cluster's sum.
    async fn add_step_tallies(&self, tallies: &[StepTally]) -> StoreResult<()>;

    /// Deletes the activity minutes before `before_minute`; returns how many rows went (0 where
    /// another process is pruning them now: one prunes at a time).
    async fn prune_activity(&self, before_minute: i64) -> StoreResult<u64>;
}
