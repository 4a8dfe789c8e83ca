//! [`crate::store::Dispatches`]: what the redispatch loop and the flow limits ask of remote
//! steps, on the statements of `reads.rs` and `lifecycle.rs`.

use async_trait::async_trait;

use super::SqliteStore;
use crate::model::{Millis, RunId, Scope};
use crate::store::{Dispatches, LostDispatch, PendingStep, SlotOut, StoreResult};

#[async_trait]
impl Dispatches for SqliteStore {
    async fn pending_remote_steps(
        &self,
        scope: &Scope,
        lost: &LostDispatch,
        limit: u32,
    ) -> StoreResult<Vec<PendingStep>> {
        let (scope, lost) = (scope.clone(), lost.clone());
        self.readers
            .read(move |conn| super::reads::pending_remote_steps(conn, &scope, &lost, limit))
            .await
    }

    async fn slots_out(&self, scope: &Scope, limit: u32) -> StoreResult<Vec<SlotOut>> {
        let scope = scope.clone();
        self.readers
            .read(move |conn| super::reads::slots_out(conn, &scope, limit))
            .await
    }

    async fn beat_step(
        &self,
        scope: &Scope,
        id: &RunId,
        seq: u32,
        group: &str,
        now: Millis,
    ) -> StoreResult<bool> {
        let (scope, id, group) = (scope.clone(), id.clone(), group.to_owned());
        self.writer
            .write(move |conn| super::lifecycle::beat_step(conn, &scope, &id, seq, &group, now))
            .await
    }

    async fn mark_dispatched(
        &self,
        id: &RunId,
        seq: u32,
        by: &str,
        now: Millis,
    ) -> StoreResult<()> {
        let (id, by) = (id.clone(), by.to_owned());
        self.writer
            .write(move |conn| super::lifecycle::mark_dispatched(conn, &id, seq, &by, now))
            .await
    }
}
