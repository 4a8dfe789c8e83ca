//! Resolving waits: step retries, pending checkpoints and a parent's wait on its child.

use rusqlite::{Connection, params};

use super::rows::{CHECKPOINT_COLS, checkpoint_from_row, db, from_json, to_json};
use super::sql::{Sql, optional};
use crate::model::{
    Checkpoint, CheckpointKind, CheckpointStatus, Millis, RetryPolicy, Run, RunId, RunStatus,
    StepFailure, StepResult,
};
use crate::store::{StoreResult, rules};

/// If the failed step may be retried (retryable error, tries left in its policy), keeps its
/// checkpoint pending with the backoff as `wake_at` and no dispatch time; the run's next turn
/// dispatches it once due. Returns the updated checkpoint, or `None` when the failure is final.
pub(super) fn schedule_retry(
    conn: &Connection,
    result: &StepResult,
    error: &StepFailure,
    now: Millis,
) -> StoreResult<Option<Checkpoint>> {
    if !error.is_retryable() {
        return Ok(None);
    }
    let row = optional(
        conn.prepare_cached(
            "SELECT attempts, retry_policy FROM checkpoints \
             WHERE run_id = ? AND seq = ? AND kind = 'remote_step' AND status IN ('pending', 'running')",
        )
        .map_err(db)?
        .query_row(params![result.run_id.as_str(), i64::from(result.seq)], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, Option<String>>(1)?))
        }),
    )?;
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
    let mut sql =
        Sql::new("UPDATE checkpoints SET attempts = attempts + 1, enqueued_at = NULL, wake_at = ");
    sql.bind(due)
        .push(", error = ")
        .bind(to_json(error))
        .push(", started_at = COALESCE(")
        .bind(result.started_at)
        .push(", started_at) WHERE run_id = ")
        .bind(result.run_id.as_str().to_owned())
        .push(" AND seq = ")
        .bind(i64::from(result.seq))
        .push(&format!(
            " AND kind = 'remote_step' AND status IN ('pending', 'running') RETURNING {CHECKPOINT_COLS}"
        ));
    sql.one(conn, checkpoint_from_row)
}

/// How a pending checkpoint resolves: completed (with an output, JSON text) or failed (with
/// an error, JSON text).
pub(super) enum Resolution {
    Completed(Option<String>),
    Failed(String),
}

/// Resolves checkpoint `(run, seq)` of `kind` if it is still pending; returns how many rows
/// changed (0 when it was already resolved, so a late or repeated resolution is a no-op).
pub(super) fn resolve_pending(
    conn: &Connection,
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
    let changed = conn
        .prepare_cached(
            "UPDATE checkpoints SET status = ?, output = ?, error = ?, finished_at = ? \
             WHERE run_id = ? AND seq = ? AND kind = ? AND status = 'pending'",
        )
        .map_err(db)?
        .execute(params![
            status.as_str(),
            output,
            error,
            now,
            run.as_str(),
            seq,
            kind.as_str()
        ])
        .map_err(db)?;
    Ok(changed as u64)
}

pub(super) use crate::store::rules::settles_parent;

/// Marks run `id` as woken: a suspended run becomes due now, a running one turns again after
/// its current turn.
pub(super) fn wake(conn: &Connection, id: &RunId, now: Millis) -> StoreResult<u64> {
    let changed = conn
        .prepare_cached(
            "UPDATE runs SET needs_wake = 1, updated_at = ?1, \
             wake_at = CASE WHEN status = 'suspended' THEN ?1 ELSE wake_at END \
             WHERE id = ?2 AND status IN ('pending', 'suspended', 'running')",
        )
        .map_err(db)?
        .execute(params![now, id.as_str()])
        .map_err(db)?;
    Ok(changed as u64)
}

/// Resolves the parent's wait on `child` with the child's outcome and wakes the parent, in the
/// child's final transaction (so a parent never misses its child's end).
pub(super) fn settle_parent(
    conn: &Connection,
    parent: &RunId,
    child: &Run,
    now: Millis,
) -> StoreResult<()> {
    let Some(seq) = rules::child_seq(&child.id) else {
        return Ok(());
    };
    let resolution = match child.status {
        RunStatus::Completed => Resolution::Completed(Some(to_json(&child.output))),
        other => {
            let failure = child
                .error
                .clone()
                .unwrap_or_else(|| rules::child_ended(&child.id, other));
            Resolution::Failed(to_json(&failure))
        }
    };
    if resolve_pending(conn, parent, seq, CheckpointKind::Child, resolution, now)? > 0 {
        wake(conn, parent, now)?;
    }
    Ok(())
}
