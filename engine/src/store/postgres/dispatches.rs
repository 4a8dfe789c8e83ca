//! [`crate::store::Dispatches`]: what the redispatch loop and the flow limits ask of remote
//! steps, on the statements of `reads.rs` and `lifecycle.rs`.

use async_trait::async_trait;

use super::PgStore;
use crate::model::{Millis, RunId, Scope};
use crate::store::{Dispatches, LostDispatch, PendingStep, SlotOut, StoreResult};

#[async_trait]
impl Dispatches for PgStore {
    async fn pending_remote_steps(
        &self,
        scope: &Scope,
        lost: &LostDispatch,
        limit: u32,
    ) -> StoreResult<Vec<PendingStep>> {
        super::reads::pending_remote_steps(&self.pool, scope, lost, limit).await
    }

    async fn slots_out(&self, scope: &Scope, limit: u32) -> StoreResult<Vec<SlotOut>> {
        super::reads::slots_out(&self.pool, scope, limit).await
    }

    async fn beat_step(
        &self,
        scope: &Scope,
        id: &RunId,
        seq: u32,
        group: &str,
        now: Millis,
    ) -> StoreResult<bool> {
        super::lifecycle::beat_step(&self.pool, scope, id, seq, group, now).await
    }

    async fn mark_dispatched(
        &self,
        id: &RunId,
        seq: u32,
        by: &str,
        now: Millis,
    ) -> StoreResult<()> {
        super::lifecycle::mark_dispatched(&self.pool, id, seq, by, now).await
    }
}
