//! [`crate::store::Upkeep`]: the sweep's and the counters' upkeep, on the statements of
//! `lifecycle.rs`, `reads.rs` and `activity.rs`.

use async_trait::async_trait;

use super::SqliteStore;
use crate::model::{Millis, Run, Scope, StepTally};
use crate::store::{StoreResult, Upkeep};

#[async_trait]
impl Upkeep for SqliteStore {
    async fn sweep_abandoned(
        &self,
        scope: &Scope,
        max_recoveries: u32,
        now: Millis,
    ) -> StoreResult<Vec<Run>> {
        let scope = scope.clone();
        self.writer
            .write(move |conn| super::lifecycle::sweep_abandoned(conn, &scope, max_recoveries, now))
            .await
    }

    async fn wake_blocked(&self, scope: &Scope, now: Millis) -> StoreResult<Vec<Run>> {
        let scope = scope.clone();
        self.writer
            .write(move |conn| super::lifecycle::wake_blocked(conn, &scope, now))
            .await
    }

    async fn unblock_runs(
        &self,
        scope: &Scope,
        served: &[(String, u32)],
        now: Millis,
    ) -> StoreResult<Vec<Run>> {
        let (scope, served) = (scope.clone(), served.to_vec());
        self.writer
            .write(move |conn| super::lifecycle::unblock_runs(conn, &scope, &served, now))
            .await
    }

    async fn fold_counts(&self) -> StoreResult<()> {
        // The triggers update the totals in place: nothing waits to be folded.
        Ok(())
    }

    async fn add_step_tallies(&self, tallies: &[StepTally]) -> StoreResult<()> {
        let tallies = tallies.to_vec();
        self.writer
            .write(move |conn| super::activity::add_step_tallies(conn, &tallies))
            .await
    }

    async fn prune_activity(&self, before_minute: i64) -> StoreResult<u64> {
        self.writer
            .write(move |conn| super::activity::prune_activity(conn, before_minute))
            .await
    }
}
