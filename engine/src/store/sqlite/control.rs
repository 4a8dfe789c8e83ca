//! [`crate::store::RunControl`]: the control verbs and signals, on the statements of
//! `lifecycle.rs`.

use async_trait::async_trait;
use serde_json::Value;

use super::SqliteStore;
use crate::model::{AcceptedUpdate, Millis, Run, RunId, RunStatus, Scope, StoredUpdate, UpdateId};
use crate::store::{RunControl, RunPatch, SignalSent, StoreResult, UpdateSent};

#[async_trait]
impl RunControl for SqliteStore {
    async fn update_run_if(
        &self,
        scope: &Scope,
        id: &RunId,
        expected: &[RunStatus],
        patch: RunPatch,
        now: Millis,
    ) -> StoreResult<Option<Run>> {
        let (scope, id, expected) = (scope.clone(), id.clone(), expected.to_vec());
        self.writer
            .write(move |conn| {
                super::lifecycle::update_run_if(conn, &scope, &id, &expected, &patch, now)
            })
            .await
    }

    async fn retry_run(&self, scope: &Scope, id: &RunId, now: Millis) -> StoreResult<Option<Run>> {
        let (scope, id) = (scope.clone(), id.clone());
        self.writer
            .write(move |conn| super::lifecycle::retry_run(conn, &scope, &id, now))
            .await
    }

    async fn send_signal(
        &self,
        scope: &Scope,
        id: &RunId,
        name: &str,
        payload: &Value,
        now: Millis,
    ) -> StoreResult<SignalSent> {
        let (scope, id, name, payload) =
            (scope.clone(), id.clone(), name.to_owned(), payload.clone());
        self.writer
            .write(move |conn| {
                super::lifecycle::send_signal(conn, &scope, &id, &name, &payload, now)
            })
            .await
    }

    async fn send_update(
        &self,
        scope: &Scope,
        id: &RunId,
        update: &AcceptedUpdate,
        now: Millis,
    ) -> StoreResult<UpdateSent> {
        let (scope, id, update) = (scope.clone(), id.clone(), update.clone());
        self.writer
            .write(move |conn| super::lifecycle::send_update(conn, &scope, &id, &update, now))
            .await
    }

    async fn stored_update(
        &self,
        scope: &Scope,
        id: &RunId,
        update_id: &UpdateId,
    ) -> StoreResult<Option<StoredUpdate>> {
        let (scope, id, update_id) = (scope.clone(), id.clone(), update_id.clone());
        self.readers
            .read(move |conn| super::lifecycle::scoped_update(conn, &scope, &id, &update_id))
            .await
    }
}
