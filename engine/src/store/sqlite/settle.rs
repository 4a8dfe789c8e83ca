//! Resolving waits: step retries, pending checkpoints and a parent's wait on its child.

use sqlx::SqliteConnection;
use sqlx::sqlite::SqliteRow;

use super::rows::{CHECKPOINT_COLS, db, from_json, to_json};
use crate::model::{
    CheckpointKind, CheckpointStatus, Millis, RetryPolicy, Run, RunId, RunStatus, StepFailure,
    StepResult,
};
use crate::store::StoreResult;

/// If the failed step may be retried (retryable error, tries left in its policy), keeps its
/// checkpoint pending with the backoff as `wake_at` and no dispatch time; the run's next turn
/// dispatches it once due. Returns the updated checkpoint, or `None` when the failure is final.
pub(super) async fn schedule_retry(
    conn: &mut SqliteConnection,
    result: &StepResult,
    error: &StepFailure,
    now: Millis,
) -> StoreResult<Option<SqliteRow>> {
    if !error.is_retryable() {
        return Ok(None);
    }
    let row: Option<(i64, Option<String>)> = sqlx::query_as(
        "SELECT attempts, retry_policy FROM checkpoints \
         WHERE run_id = ? AND seq = ? AND kind = 'remote_step' AND status IN ('pending', 'running')",
    )
    .bind(result.run_id.as_str())
    .bind(i64::from(result.seq))
    .fetch_optional(&mut *conn)
    .await
    .map_err(db)?;
    let Some((attempts, Some(policy))) = row else {
        return Ok(None);
    };
    let policy: RetryPolicy = from_json(&policy, "checkpoint retry policy")?;
    let attempts = u32::try_from(attempts).unwrap_or(u32::MAX);
    if attempts >= policy.max_attempts {
        return Ok(None);
    }
    let spread: f64 = rand::random::<f64>() * 2.0 - 1.0;
    let due =
        now.saturating_add(i64::try_from(policy.delay_ms(attempts, spread)).unwrap_or(i64::MAX));
    let sql = format!(
        "UPDATE checkpoints SET attempts = attempts + 1, enqueued_at = NULL, wake_at = ?, error = ?, \
         started_at = COALESCE(?, started_at) \
         WHERE run_id = ? AND seq = ? AND kind = 'remote_step' AND status IN ('pending', 'running') \
         RETURNING {CHECKPOINT_COLS}"
    );
    sqlx::query(&sql)
        .bind(due)
        .bind(to_json(error))
        .bind(result.started_at)
        .bind(result.run_id.as_str())
        .bind(i64::from(result.seq))
        .fetch_optional(&mut *conn)
        .await
        .map_err(db)
}

/// How a pending checkpoint resolves: completed (with an output, JSON text) or failed (with
/// an error, JSON text).
pub(super) enum Resolution {
    Completed(Option<String>),
    Failed(String),
}

/// Resolves checkpoint `(run, seq)` of `kind` if it is still pending; returns how many rows
/// changed (0 when it was already resolved, so a late or repeated resolution is a no-op).
pub(super) async fn resolve_pending(
    conn: &mut SqliteConnection,
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
        "UPDATE checkpoints SET status = ?, output = ?, error = ?, finished_at = ? \
         WHERE run_id = ? AND seq = ? AND kind = ? AND status = 'pending'",
    )
    .bind(status.as_str())
    .bind(output)
    .bind(error)
    .bind(now)
    .bind(run.as_str())
    .bind(seq)
    .bind(kind.as_str())
    .execute(&mut *conn)
    .await
    .map_err(db)?;
    Ok(done.rows_affected())
}

/// Whether a child ending in `status` settles its parent's wait: every terminal status but
/// `continued`, whose successor settles it instead.
pub(super) fn settles_parent(status: RunStatus) -> bool {
    status.is_terminal() && status != RunStatus::Continued
}

/// Resolves the parent's wait on `child` with the child's outcome and wakes the parent, in the
/// child's final transaction (so a parent never misses its child's end).
pub(super) async fn settle_parent(
    conn: &mut SqliteConnection,
    parent: &RunId,
    child: &Run,
    now: Millis,
) -> StoreResult<()> {
    // `<parent>.child.<seq>`, or `<parent>.child.<seq>:c<n>` for its ContinueAsNew successors.
    let Some(seq) = child
        .id
        .as_str()
        .rsplit_once(".child.")
        .and_then(|(_, s)| s.split(':').next())
        .and_then(|s| s.parse::<i64>().ok())
    else {
        return Ok(());
    };
    let resolution = match child.status {
        RunStatus::Completed => Resolution::Completed(Some(to_json(&child.output))),
        other => {
            let failure = child.error.clone().unwrap_or_else(|| {
                StepFailure::new(format!("child run {} ended {other}", child.id))
            });
            Resolution::Failed(to_json(&failure))
        }
    };
    let settled =
        resolve_pending(conn, parent, seq, CheckpointKind::Child, resolution, now).await?;
    if settled > 0 {
        sqlx::query(
            "UPDATE runs SET needs_wake = 1, updated_at = ?, \
             wake_at = CASE WHEN status = 'suspended' THEN ? ELSE wake_at END \
             WHERE id = ? AND status IN ('pending', 'suspended', 'running')",
        )
        .bind(now)
        .bind(now)
        .bind(parent.as_str())
        .execute(&mut *conn)
        .await
        .map_err(db)?;
    }
    Ok(())
}
