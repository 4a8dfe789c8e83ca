//! How a wait resolves: a failed step's retry, a pending checkpoint, and a parent's wait on a
//! child that ended.
//!
//! One rule, two dialects: which child endings settle a parent, what the parent's wait records
//! for each, whether a failed step is tried again and when, are decided here, once; each store
//! supplies the statements ([`Settle`]) in its SQL.

use serde::Serialize;

use crate::model::{
    Checkpoint, CheckpointKind, CheckpointStatus, Millis, RetryPolicy, Run, RunId, RunStatus,
    StepFailure, StepResult,
};
use crate::store::StoreResult;

/// How a pending checkpoint resolves: completed (with an output) or failed (with an error),
/// each a JSON column's value as the store binds it (`J`).
pub(crate) enum Resolution<J> {
    Completed(Option<J>),
    Failed(J),
}

impl<J> Resolution<J> {
    /// The checkpoint's status, output and error after it.
    pub(crate) fn columns(self) -> (CheckpointStatus, Option<J>, Option<J>) {
        match self {
            Resolution::Completed(output) => (CheckpointStatus::Completed, output, None),
            Resolution::Failed(error) => (CheckpointStatus::Failed, None, Some(error)),
        }
    }
}

/// The statements that resolve waits, in a store's dialect, inside its write transaction.
pub(crate) trait Settle {
    /// A JSON column's value as this store binds it (SQLite: text; PostgreSQL: `jsonb`).
    type Json;

    /// `value` as a JSON column's value (serialising plain data cannot fail).
    fn json<T: Serialize>(value: &T) -> Self::Json;

    /// Resolves checkpoint `(run, seq)` of `kind` if it is still pending; returns how many rows
    /// changed (0 when it was already resolved, so a late or repeated resolution is a no-op).
    async fn resolve_pending(
        &mut self,
        run: &RunId,
        seq: i64,
        kind: CheckpointKind,
        resolution: Resolution<Self::Json>,
        now: Millis,
    ) -> StoreResult<u64>;

    /// Marks run `id` as woken: a suspended run becomes due now, a running one turns again after
    /// its current turn.
    async fn wake(&mut self, id: &RunId, now: Millis) -> StoreResult<u64>;

    /// How many times remote step `seq` of run `run` was tried, and its retry policy, while it
    /// still waits for a result; `None` when it does not.
    async fn tries(
        &mut self,
        run: &RunId,
        seq: u32,
    ) -> StoreResult<Option<(u32, Option<RetryPolicy>)>>;

    /// Keeps the step `result` failed pending for another try due at `due`, with no dispatch
    /// time and `error` as its last failure; the checkpoint after it.
    async fn retry_at(
        &mut self,
        result: &StepResult,
        error: &StepFailure,
        due: Millis,
    ) -> StoreResult<Option<Checkpoint>>;
}

/// Whether a child ending in `status` settles its parent's wait: every terminal status but
/// `continued`, whose successor settles it instead.
pub(crate) fn settles_parent(status: RunStatus) -> bool {
    status.is_terminal() && status != RunStatus::Continued
}

/// The position of the parent's wait on child `id`: `<parent>.child.<seq>`, or
/// `<parent>.child.<seq>:c<n>` for its ContinueAsNew successors. `None` for a top-level run.
pub(crate) fn child_seq(id: &RunId) -> Option<i64> {
    id.as_str()
        .rsplit_once(".child.")
        .and_then(|(_, s)| s.split(':').next())
        .and_then(|s| s.parse::<i64>().ok())
}

/// The failure a parent's wait records for a child that ended `status` without an error.
fn child_ended(child: &RunId, status: RunStatus) -> StepFailure {
    StepFailure::new(format!("child run {child} ended {status}"))
}

/// Resolves the parent's wait on `child` with the child's outcome and wakes the parent, in the
/// child's final transaction (so a parent never misses its child's end).
pub(crate) async fn settle_parent<S: Settle>(
    s: &mut S,
    parent: &RunId,
    child: &Run,
    now: Millis,
) -> StoreResult<()> {
    let Some(seq) = child_seq(&child.id) else {
        return Ok(());
    };
    let resolution = match child.status {
        RunStatus::Completed => Resolution::Completed(Some(S::json(&child.output))),
        other => {
            let failure = child
                .error
                .clone()
                .unwrap_or_else(|| child_ended(&child.id, other));
            Resolution::Failed(S::json(&failure))
        }
    };
    if s.resolve_pending(parent, seq, CheckpointKind::Child, resolution, now)
        .await?
        > 0
    {
        s.wake(parent, now).await?;
    }
    Ok(())
}

/// Settles the wait of `run`'s parent, if it has one and `run`'s status settles it.
pub(crate) async fn settle_ended<S: Settle>(s: &mut S, run: &Run, now: Millis) -> StoreResult<()> {
    match &run.parent_run_id {
        Some(parent) if settles_parent(run.status) => settle_parent(s, parent, run, now).await,
        _ => Ok(()),
    }
}

/// If the failed step may be retried (retryable error, tries left in its policy), keeps its
/// checkpoint pending with the backoff as `wake_at` and no dispatch time; the run's next turn
/// dispatches it once due. Returns the updated checkpoint, or `None` when the failure is final.
pub(crate) async fn schedule_retry<S: Settle>(
    s: &mut S,
    result: &StepResult,
    error: &StepFailure,
    now: Millis,
) -> StoreResult<Option<Checkpoint>> {
    if !error.is_retryable() {
        return Ok(None);
    }
    let Some((attempts, Some(policy))) = s.tries(&result.run_id, result.seq).await? else {
        return Ok(None);
    };
    if attempts >= policy.max_attempts {
        return Ok(None);
    }
    let spread: f64 = rand::random::<f64>() * 2.0 - 1.0;
    let due =
        now.saturating_add(i64::try_from(policy.delay_ms(attempts, spread)).unwrap_or(i64::MAX));
    s.retry_at(result, error, due).await
}
