//! Resolving waits: step retries, pending checkpoints and a parent's wait on its child.

use serde_json::Value;
use sqlx::PgConnection;

use super::rows::{CHECKPOINT_COLS, checkpoint_from_row, db, to_value};
use crate::model::{
    Checkpoint, CheckpointKind, CheckpointStatus, Millis, RetryPolicy, Run, RunId, RunStatus,
    StepFailure, StepResult,
};
use crate::store::{StoreError, StoreResult, rules};

/// If the failed step may be retried (retryable error, tries left in its policy), keeps its
/// checkpoint pending with the backoff as `wake_at` and no dispatch time; the run's next turn
/// dispatches it once due. Returns the updated checkpoint, or `None` when the failure is final.
pub(super) async fn schedule_retry(
    conn: &mut PgConnection,
    result: &StepResult,
    error: &StepFailure,
    now: Millis,
) -> StoreResult<Option<Checkpoint>> {
    if !error.is_retryable() {
        return Ok(None);
    }
    let row: Option<(i32, Option<Value>)> = sqlx::query_as(
        "SELECT attempts, retry_policy FROM checkpoints WHERE run_id = $1 AND seq = $2 \
         AND kind = 'remote_step' AND status IN ('pending', 'running') FOR UPDATE",
    )
    .bind(result.run_id.as_str())
    .bind(result.seq as i32)
    .fetch_optional(&mut *conn)
    .await
    .map_err(db)?;
    let Some((attempts, Some(policy))) = row else {
        return Ok(None);
    };
    let policy: RetryPolicy = serde_json::from_value(policy)
        .map_err(|e| StoreError::Corrupt(format!("checkpoint retry policy: {e}")))?;
    let attempts = u32::try_from(attempts).unwrap_or(u32::MAX);
    if attempts >= policy.max_attempts {
        return Ok(None);
    }
    let spread: f64 = rand::random::<f64>() * 2.0 - 1.0;
    let due =
        now.saturating_add(i64::try_from(policy.delay_ms(attempts, spread)).unwrap_or(i64::MAX));
    let row = sqlx::query(&format!(
        "UPDATE checkpoints SET attempts = attempts + 1, enqueued_at = NULL, wake_at = $1, \
         error = $2, started_at = COALESCE($3, started_at) WHERE run_id = $4 AND seq = $5 \
         AND kind = 'remote_step' AND status IN ('pending', 'running') RETURNING {CHECKPOINT_COLS}"
    ))
    .bind(due)
    .bind(to_value(error))
    .bind(result.started_at)
    .bind(result.run_id.as_str())
    .bind(result.seq as i32)
    .fetch_optional(&mut *conn)
    .await
    .map_err(db)?;
    row.as_ref().map(checkpoint_from_row).transpose()
}

/// How a pending checkpoint resolves.
pub(super) enum Resolution {
    Completed(Option<Value>),
    Failed(Value),
}

/// Resolves checkpoint `(run, seq)` of `kind` if it is still pending; returns how many rows
/// changed (0 when it was already resolved, so a late or repeated resolution is a no-op).
pub(super) async fn resolve_pending(
    conn: &mut PgConnection,
    run: &RunId,
    seq: i64,
    kind: CheckpointKind,
    resolution: Resolution,
    now: Millis,
) -> StoreResult<u64> {
    let (status, output, error) = match resolution {
        Resolution::Completed(output) => (CheckpointStatus::Completed, output, None),
        Resolution::Failed(error) => (CheckpointStatus::Failed, None, Some(error)),
    };
    let done = sqlx::query(
        "UPDATE checkpoints SET status = $1, output = $2, error = $3, finished_at = $4 \
         WHERE run_id = $5 AND seq = $6 AND kind = $7 AND status = 'pending'",
    )
    .bind(status.as_str())
    .bind(output)
    .bind(error)
    .bind(now)
    .bind(run.as_str())
    .bind(seq as i32)
    .bind(kind.as_str())
    .execute(&mut *conn)
    .await
    .map_err(db)?;
    Ok(done.rows_affected())
}

/// Marks run `id` as woken: a suspended run becomes due now, a running one turns again after
/// its current turn.
pub(super) async fn wake(conn: &mut PgConnection, id: &RunId, now: Millis) -> StoreResult<u64> {
    let done = sqlx::query(
        "UPDATE runs SET needs_wake = TRUE, updated_at = $1, \
         wake_at = CASE WHEN status = 'suspended' THEN $1 ELSE wake_at END \
         WHERE id = $2 AND status IN ('pending', 'suspended', 'running')",
    )
    .bind(now)
    .bind(id.as_str())
    .execute(&mut *conn)
    .await
    .map_err(db)?;
    Ok(done.rows_affected())
}

/// Resolves the parent's wait on `child` with the child's outcome and wakes the parent, in the
/// child's final transaction (so a parent never misses its child's end).
pub(super) async fn settle_parent(
    conn: &mut PgConnection,
    parent: &RunId,
    child: &Run,
    now: Millis,
) -> StoreResult<()> {
    let Some(seq) = rules::child_seq(&child.id) else {
        return Ok(());
    };
    let resolution = match child.status {
        RunStatus::Completed => Resolution::Completed(Some(to_value(&child.output))),
        other => {
            let failure = child
                .error
                .clone()
                .unwrap_or_else(|| rules::child_ended(&child.id, other));
            Resolution::Failed(to_value(&failure))
        }
    };
    if resolve_pending(conn, parent, seq, CheckpointKind::Child, resolution, now).await? > 0 {
        wake(conn, parent, now).await?;
    }
    Ok(())
}
