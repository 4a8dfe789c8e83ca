//! The control verbs' writes: a compare-and-set status change (cancel, continue), a retry from
//! the last good checkpoint, a buffered signal, and an update kept with its reply.

use async_trait::async_trait;
use serde_json::Value;

use crate::model::{AcceptedUpdate, Millis, Run, RunId, RunStatus, Scope, StoredUpdate, UpdateId};
use crate::store::{RunPatch, SignalSent, StoreResult, UpdateSent};

/// What callers do to a run that exists, each inside the caller's scope.
#[async_trait]
pub trait RunControl: Send + Sync + 'static {
    /// Compare-and-set: moves run `id` (if `scope` sees it and its status is one of `expected`)
    /// to `patch.status`. `None` when the run is invisible or in another status, so a stale
    /// caller can never resurrect a finished run.
    async fn update_run_if(
        &self,
        scope: &Scope,
        id: &RunId,
        expected: &[RunStatus],
        patch: RunPatch,
        now: Millis,
    ) -> StoreResult<Option<Run>>;

    /// Re-drives a failed or dead run from its last good checkpoint: the run goes back to
    /// `pending` and its failed checkpoints (and anything after the first) are dropped, so they
    /// run again. It is admitted again ([`Run::is_fresh`]): a top-level run waits queued, like a
    /// new start, while its tenant's concurrency ceiling or its workflow's limit is reached.
    /// `None` when the run is invisible or not failed/dead.
    async fn retry_run(&self, scope: &Scope, id: &RunId, now: Millis) -> StoreResult<Option<Run>>;

    /// Buffers signal `name` for run `id` (if `scope` sees it and it has not ended) and wakes the
    /// run. A signal sent before the run waits for it is kept until a wait consumes it.
    async fn send_signal(
        &self,
        scope: &Scope,
        id: &RunId,
        name: &str,
        payload: &Value,
        now: Millis,
    ) -> StoreResult<SignalSent>;

    /// Keeps `update` with run `id` (if `scope` sees it and it has not ended) and buffers its
    /// argument as signal `update.name`, waking the run; in one transaction, so the update is
    /// delivered exactly when its reply is kept. An update kept before under the same id wins:
    /// nothing new is written, and the caller gets the first reply.
    async fn send_update(
        &self,
        scope: &Scope,
        id: &RunId,
        update: &AcceptedUpdate,
        now: Millis,
    ) -> StoreResult<UpdateSent>;

    /// The update kept with run `id` (if `scope` sees it) under `update_id`.
    async fn stored_update(
        &self,
        scope: &Scope,
        id: &RunId,
        update_id: &UpdateId,
    ) -> StoreResult<Option<StoredUpdate>>;
}
