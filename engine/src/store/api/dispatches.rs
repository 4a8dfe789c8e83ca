//! Remote steps' dispatch bookkeeping: which steps may be lost and must be sent again, who sent
//! them, workers' beats that keep them alive, and which hold concurrency slots.

use crate::model::{Millis, RunId, Scope};
use crate::store::{LostDispatch, PendingStep, SlotOut, StoreResult};
use async_trait::async_trait;

/// The record of sent remote steps, for the redispatch loop and workers' beats.
#[async_trait]
pub trait Dispatches: Send + Sync + 'static {
    /// Remote steps in `scope` still waiting for a result whose dispatch `lost` says may be
    /// lost, oldest dispatch first.
    async fn pending_remote_steps(
        &self,
        scope: &Scope,
        lost: &LostDispatch,
        limit: u32,
    ) -> StoreResult<Vec<PendingStep>>;

    /// Up to `limit` remote steps in `scope` out now (dispatched, no result) that hold
    /// concurrency slots, of runs that have not ended: the slots whose leases are renewed.
    async fn slots_out(&self, scope: &Scope, limit: u32) -> StoreResult<Vec<SlotOut>>;

    /// Notes a worker's beat for remote step `seq` of run `id` (wire §2.6): its dispatch time
    /// moves to `now`, so its timeout and the lost-dispatch check count from the beat. Only a
    /// pending step dispatched to routing token `group`, of a run in `scope`: a worker of one
    /// tenant cannot keep another tenant's step alive. Returns whether the step was found.
    async fn beat_step(
        &self,
        scope: &Scope,
        id: &RunId,
        seq: u32,
        group: &str,
        now: Millis,
    ) -> StoreResult<bool>;

    /// Notes that driver `by` (re)dispatched a remote step at `now`.
    async fn mark_dispatched(&self, id: &RunId, seq: u32, by: &str, now: Millis)
    -> StoreResult<()>;
}
