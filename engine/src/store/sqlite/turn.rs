//! Persisting a turn: its checkpoints, resolved waits, children, cancellations and the run's
//! next status, in one write.

use sqlx::SqliteConnection;

use super::rows::{RUN_COLS, db, insert_run, run_from_row, to_json};
use super::settle::{Resolution, resolve_pending, schedule_retry, settle_parent, settles_parent};
use super::writer::Wrote;
use crate::model::{
    CheckpointKind, Millis, Run, RunId, RunStatus, StepFailure, StepOutcome, StepResult,
};
use crate::store::{Claim, StoreResult, TurnCommit, TurnOutcome};

/// [`crate::store::Store::commit_turn`] on the writer's connection.
pub(super) async fn commit_turn(
    conn: &mut SqliteConnection,
    lease: Claim,
    id: RunId,
    commit: TurnCommit,
    now: Millis,
) -> StoreResult<Wrote<Option<Run>>> {
    let id = &id;
    let (status, output, error, wake_at, finished_at) = match &commit.outcome {
        TurnOutcome::Suspend { wake_at } => (RunStatus::Suspended, None, None, *wake_at, None),
        TurnOutcome::Complete(out) => (
            RunStatus::Completed,
            Some(to_json(out)),
            None,
            None,
            Some(now),
        ),
        TurnOutcome::Fail(err) => (RunStatus::Failed, None, Some(to_json(err)), None, Some(now)),
        TurnOutcome::Block(reason) => (RunStatus::Blocked, None, Some(to_json(reason)), None, None),
        TurnOutcome::Continue(next) => (
            RunStatus::Continued,
            Some(to_json(&serde_json::json!({ "continuedAs": next.id }))),
            None,
            None,
            Some(now),
        ),
    };
    // Woken during the turn (a result or signal landed, the timer is already due, or a step
    // try timed out here): stay `running` under the same lease; the caller turns again at once.
    let woken = "?1 = 'suspended' AND (needs_wake = 1 OR ?10 OR (?2 IS NOT NULL AND ?2 <= ?3))";
    let sql = format!(
        "UPDATE runs SET \
         status = CASE WHEN {woken} THEN 'running' ELSE ?1 END, \
         output = ?4, error = ?5, \
         wake_at = CASE WHEN {woken} THEN NULL ELSE ?2 END, \
         attempt = attempt + (CASE WHEN {woken} THEN 1 ELSE 0 END), \
         locked_until = CASE WHEN {woken} THEN ?6 ELSE NULL END, \
         locked_by = CASE WHEN {woken} THEN locked_by ELSE NULL END, \
         needs_wake = 0, updated_at = ?3, finished_at = ?7 \
         WHERE id = ?8 AND status = 'running' AND locked_by = ?9 RETURNING {RUN_COLS}"
    );
    let row = sqlx::query(&sql)
        .bind(status.as_str())
        .bind(wake_at)
        .bind(now)
        .bind(output)
        .bind(error)
        .bind(lease.until)
        .bind(finished_at)
        .bind(id.as_str())
        .bind(&lease.owner)
        .bind(!commit.timed_out_steps.is_empty())
        .fetch_optional(&mut *conn)
        .await
        .map_err(db)?;
    let Some(row) = row else {
        return Ok(Wrote::Keep(None));
    };
    for cp in &commit.checkpoints {
        sqlx::query(
            "INSERT INTO checkpoints (run_id, seq, kind, name, status, attempts, worker_group, input, \
             output, error, wake_at, enqueued_at, started_at, finished_at, retry_policy, timeout_ms) \
             VALUES (?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (run_id, seq) DO NOTHING",
        )
        .bind(id.as_str())
        .bind(i64::from(cp.seq))
        .bind(cp.kind.as_str())
        .bind(&cp.name)
        .bind(cp.status.as_str())
        .bind(cp.worker_group.as_deref())
        .bind(cp.input.as_ref().map(to_json))
        .bind(cp.output.as_ref().map(to_json))
        .bind(cp.error.as_ref().map(to_json))
        .bind(cp.wake_at)
        .bind(cp.enqueued_at)
        .bind(cp.started_at)
        .bind(cp.finished_at)
        .bind(cp.retry_policy.as_ref().map(to_json))
        .bind(cp.timeout_ms.map(|ms| i64::try_from(ms).unwrap_or(i64::MAX)))
        .execute(&mut *conn)
        .await
        .map_err(db)?;
    }
    for seq in &commit.redispatched {
        sqlx::query(
            "UPDATE checkpoints SET enqueued_at = ? \
             WHERE run_id = ? AND seq = ? AND kind = 'remote_step' AND status = 'pending' AND enqueued_at IS NULL",
        )
        .bind(now)
        .bind(id.as_str())
        .bind(i64::from(*seq))
        .execute(&mut *conn)
        .await
        .map_err(db)?;
    }
    for seq in &commit.fired_timers {
        let fired = Resolution::Completed(None);
        resolve_pending(conn, id, i64::from(*seq), CheckpointKind::Sleep, fired, now).await?;
    }
    for (signal_id, seq) in &commit.consumed_signals {
        let payload: Option<String> = sqlx::query_scalar(
            "UPDATE signals SET consumed_seq = ? WHERE id = ? AND run_id = ? AND consumed_seq IS NULL \
             RETURNING payload",
        )
        .bind(i64::from(*seq))
        .bind(signal_id)
        .bind(id.as_str())
        .fetch_optional(&mut *conn)
        .await
        .map_err(db)?;
        let Some(payload) = payload else {
            // Taken by another wait meanwhile: this turn's view was stale; discard it.
            return Ok(Wrote::Discard(None));
        };
        let got = Resolution::Completed(Some(payload));
        resolve_pending(conn, id, i64::from(*seq), CheckpointKind::Signal, got, now).await?;
    }
    for seq in &commit.timed_out_signals {
        let timeout = StepFailure::new("the signal wait timed out").with_code("timeout");
        let timed_out = Resolution::Failed(to_json(&timeout));
        resolve_pending(
            conn,
            id,
            i64::from(*seq),
            CheckpointKind::Signal,
            timed_out,
            now,
        )
        .await?;
    }
    for seq in &commit.timed_out_steps {
        time_out_step(conn, id, *seq, now).await?;
    }
    for child in &commit.children {
        if insert_run(&mut *conn, child, now, true, None)
            .await
            .map_err(db)?
            .is_none()
        {
            // The child exists (a retried parent re-issues it): if it already ended, settle
            // the new wait at once.
            let sql = format!("SELECT {RUN_COLS} FROM runs WHERE id = ?");
            let existing = sqlx::query(&sql)
                .bind(child.id.as_str())
                .fetch_one(&mut *conn)
                .await
                .map_err(db)?;
            let existing = run_from_row(&existing)?;
            if existing.status.is_terminal() {
                settle_parent(conn, id, &existing, now).await?;
            }
        }
    }
    let run = run_from_row(&row)?;
    if let TurnOutcome::Continue(next) = &commit.outcome {
        insert_run(&mut *conn, next, now, true, None)
            .await
            .map_err(db)?;
    }
    let cancelled = StepFailure::new(format!("cancelled: a sibling under run {id} failed"))
        .with_code("cancelled");
    for child in &commit.cancel_runs {
        // Only this run's own children, never anything else.
        let sql = format!(
            "UPDATE runs SET status = CASE WHEN status = 'running' THEN 'cancelling' ELSE 'cancelled' END, \
             error = ?, updated_at = ?, \
             finished_at = CASE WHEN status = 'running' THEN finished_at ELSE ? END, \
             wake_at = NULL \
             WHERE id = ? AND parent_run_id = ? AND status IN ('pending', 'suspended', 'blocked', 'running') \
             RETURNING {RUN_COLS}"
        );
        let row = sqlx::query(&sql)
            .bind(to_json(&cancelled))
            .bind(now)
            .bind(now)
            .bind(child.as_str())
            .bind(id.as_str())
            .fetch_optional(&mut *conn)
            .await
            .map_err(db)?;
        if let Some(row) = row {
            let child = run_from_row(&row)?;
            if settles_parent(child.status) {
                settle_parent(conn, id, &child, now).await?;
            }
        }
    }
    if let (Some(parent), true) = (&run.parent_run_id, settles_parent(run.status)) {
        settle_parent(conn, parent, &run, now).await?;
    }
    Ok(Wrote::Keep(Some(run)))
}

/// Fails the current try of remote step `seq` with `timeout`: retried by its policy (pending
/// again after the backoff), or failed for good. A result that arrives for a try that timed out
/// is still accepted while the step waits for its retry.
async fn time_out_step(
    conn: &mut SqliteConnection,
    id: &RunId,
    seq: u32,
    now: Millis,
) -> StoreResult<()> {
    let timeout = StepFailure::new(format!(
        "step try timed out (no result within its timeout); seq {seq}"
    ))
    .with_code("timeout");
    let result = StepResult {
        run_id: id.clone(),
        seq,
        step_id: format!("{id}:{seq}"),
        started_at: None,
        outcome: StepOutcome::Failed {
            error: timeout.clone(),
        },
    };
    if schedule_retry(conn, &result, &timeout, now).await?.is_none() {
        let failed = Resolution::Failed(to_json(&timeout));
        resolve_pending(
            conn,
            id,
            i64::from(seq),
            CheckpointKind::RemoteStep,
            failed,
            now,
        )
        .await?;
    }
    Ok(())
}
