//! [`crate::store::RunControl`]: the control verbs and signals, on the statements of
//! `lifecycle.rs`.

use async_trait::async_trait;
use serde_json::Value;

use super::PgStore;
use super::rows::db;
use crate::model::{AcceptedUpdate, Millis, Run, RunId, RunStatus, Scope, StoredUpdate, UpdateId};
use crate::store::{RunControl, RunPatch, SignalSent, StoreResult, UpdateSent};

#[async_trait]
impl RunControl for PgStore {
    async fn update_run_if(
        &self,
        scope: &Scope,
        id: &RunId,
        expected: &[RunStatus],
        patch: RunPatch,
        now: Millis,
    ) -> StoreResult<Option<Run>> {
        in_tx!(optional self.pool, |conn| super::lifecycle::update_run_if(
            conn, scope, id, expected, &patch, now
        ))
    }

    async fn retry_run(&self, scope: &Scope, id: &RunId, now: Millis) -> StoreResult<Option<Run>> {
        in_tx!(optional self.pool, |conn| super::lifecycle::retry_run(conn, scope, id, now))
    }

    async fn send_signal(
        &self,
        scope: &Scope,
        id: &RunId,
        name: &str,
        payload: &Value,
        now: Millis,
    ) -> StoreResult<SignalSent> {
        in_tx!(self.pool, |conn| super::lifecycle::send_signal(
            conn, scope, id, name, payload, now
        ))
    }

    async fn send_update(
        &self,
        scope: &Scope,
        id: &RunId,
        update: &AcceptedUpdate,
        now: Millis,
    ) -> StoreResult<UpdateSent> {
        in_tx!(self.pool, |conn| super::lifecycle::send_update(
            conn, scope, id, update, now
        ))
    }

    async fn stored_update(
        &self,
        scope: &Scope,
        id: &RunId,
        update_id: &UpdateId,
    ) -> StoreResult<Option<StoredUpdate>> {
        super::lifecycle::scoped_update(&self.pool, scope, id, update_id).await
    }
}
