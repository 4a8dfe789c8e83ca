//! [`crate::store::Upkeep`]: the sweep's and the counters' upkeep, on the statements of
//! `lifecycle.rs`, `reads.rs` and `activity.rs`.

use async_trait::async_trait;

use super::PgStore;
use super::rows::db;
use crate::model::{Millis, Run, Scope, StepTally};
use crate::store::{StoreResult, Upkeep};

#[async_trait]
impl Upkeep for PgStore {
    async fn sweep_abandoned(
        &self,
        scope: &Scope,
        max_recoveries: u32,
        now: Millis,
    ) -> StoreResult<Vec<Run>> {
        in_tx!(self.pool, |conn| super::lifecycle::sweep_abandoned(
            conn,
            scope,
            max_recoveries,
            now
        ))
    }

    async fn wake_blocked(&self, scope: &Scope, now: Millis) -> StoreResult<Vec<Run>> {
        in_tx!(self.pool, |conn| super::lifecycle::wake_blocked(
            conn, scope, now
        ))
    }

    async fn unblock_runs(
        &self,
        scope: &Scope,
        served: &[(String, u32)],
        now: Millis,
    ) -> StoreResult<Vec<Run>> {
        in_tx!(self.pool, |conn| super::lifecycle::unblock_runs(
            conn, scope, served, now
        ))
    }

    async fn fold_counts(&self) -> StoreResult<()> {
        super::reads::fold_counts(&self.pool).await
    }

    async fn add_step_tallies(&self, tallies: &[StepTally]) -> StoreResult<()> {
        super::activity::add_step_tallies(&self.pool, tallies).await
    }

    async fn prune_activity(&self, before_minute: i64) -> StoreResult<u64> {
        super::activity::prune_activity(&self.pool, before_minute).await
    }
}
