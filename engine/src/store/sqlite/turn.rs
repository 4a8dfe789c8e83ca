//! Persisting a turn: its checkpoints, resolved waits, children, cancellations and the run's
//! next status, in one write.

use rusqlite::{Connection, params};

use super::reads::history;
use super::rows::{RUN_COLS, db, insert_run, run_by_id, run_from_row, to_json};
use super::settle::{Resolution, resolve_pending, schedule_retry, settle_parent, settles_parent};
use super::sql::optional;
use super::writer::Wrote;
use crate::model::{
    CheckpointKind, Millis, Run, RunId, RunStatus, Scope, StepOutcome, StepResult, step_id,
};
use crate::store::{Claim, Committed, NewCheckpoint, StoreResult, TurnCommit, TurnOutcome, rules};

/// [`crate::store::Store::commit_turn`] inside the writer's transaction; `attempt` is `None`
/// for a run the same transaction just claimed or inserted.
pub(super) fn commit_turn(
    conn: &Connection,
    lease: &Claim,
    id: &RunId,
    attempt: Option<u32>,
    commit: &TurnCommit,
    now: Millis,
) -> StoreResult<Wrote<Option<Committed>>> {
    let Some(run) = update_run(conn, lease, id, attempt, commit, now)? else {
        return Ok(Wrote::Keep(None));
    };
    insert_checkpoints(conn, id, &commit.checkpoints, Some(&lease.owner))?;
    for seq in &commit.redispatched {
        conn.prepare_cached(
            "UPDATE checkpoints SET enqueued_at = ?, dispatched_by = ? WHERE run_id = ? \
             AND seq = ? AND kind = 'remote_step' AND status = 'pending' AND enqueued_at IS NULL",
        )
        .map_err(db)?
        .execute(params![now, lease.owner, id.as_str(), i64::from(*seq)])
        .map_err(db)?;
    }
    for seq in &commit.fired_timers {
        let fired = Resolution::Completed(None);
        resolve_pending(conn, id, i64::from(*seq), CheckpointKind::Sleep, fired, now)?;
    }
    for (signal_id, seq) in &commit.consumed_signals {
        let payload: Option<String> = optional(
            conn.prepare_cached(
                "UPDATE signals SET consumed_seq = ? WHERE id = ? AND run_id = ? \
                 AND consumed_seq IS NULL RETURNING payload",
            )
            .map_err(db)?
            .query_row(params![i64::from(*seq), signal_id, id.as_str()], |r| {
                r.get(0)
            }),
        )?;
        let Some(payload) = payload else {
            // Taken by another wait meanwhile: this turn's view was stale; discard it.
            return Ok(Wrote::Discard(None));
        };
        let got = Resolution::Completed(Some(payload));
        resolve_pending(conn, id, i64::from(*seq), CheckpointKind::Signal, got, now)?;
    }
    for seq in &commit.timed_out_signals {
        let timed_out = Resolution::Failed(to_json(&rules::signal_timed_out()));
        resolve_pending(
            conn,
            id,
            i64::from(*seq),
            CheckpointKind::Signal,
            timed_out,
            now,
        )?;
    }
    for seq in &commit.timed_out_steps {
        time_out_step(conn, id, *seq, now)?;
    }
    for child in &commit.children {
        if insert_run(conn, child, now, true, None)?.is_none() {
            // The child exists (a retried parent re-issues it): if it already ended, settle the
            // new wait at once.
            if let Some(existing) = run_by_id(conn, &child.id)?
                && existing.status.is_terminal()
            {
                settle_parent(conn, id, &existing, now)?;
            }
        }
    }
    if let TurnOutcome::Continue(next) = &commit.outcome {
        insert_run(conn, next, now, true, None)?;
    }
    let cancelled = cancel_children(conn, id, &commit.cancel_runs, now)?;
    if let (Some(parent), true) = (&run.parent_run_id, settles_parent(run.status)) {
        settle_parent(conn, parent, &run, now)?;
    }
    // A suspended run's history after a commit that only appends is derived by the caller.
    let history = match run.status {
        RunStatus::Running => Some(history(conn, id)?),
        RunStatus::Suspended if !commit.only_appends() => Some(history(conn, id)?),
        _ => None,
    };
    Ok(Wrote::Keep(Some(Committed {
        run,
        history,
        cancelled,
    })))
}

/// Moves the run to its next status if `lease` still holds it (at `attempt`, if given). A run
/// woken during the turn (a result or signal landed, the timer is already due, or a step try
/// timed out here) stays `running` under the same lease instead of suspending: the caller turns
/// again at once.
fn update_run(
    conn: &Connection,
    lease: &Claim,
    id: &RunId,
    attempt: Option<u32>,
    commit: &TurnCommit,
    now: Millis,
) -> StoreResult<Option<Run>> {
    let rules::RunUpdate {
        status,
        output,
        error,
        wake_at,
        finished_at,
    } = rules::run_update(&commit.outcome, now);
    let (output, error) = (output.map(|v| to_json(&v)), error.map(|e| to_json(&e)));
    let woken = "?1 = 'suspended' AND (needs_wake = 1 OR ?10 OR (?2 IS NOT NULL AND ?2 <= ?3))";
    let sql = format!(
        "UPDATE runs SET \
         status = CASE WHEN {woken} THEN 'running' ELSE ?1 END, \
         output = ?4, error = ?5, \
         wake_at = CASE WHEN {woken} THEN NULL ELSE ?2 END, \
         attempt = attempt + (CASE WHEN {woken} THEN 1 ELSE 0 END), \
         locked_until = CASE WHEN {woken} THEN ?6 ELSE NULL END, \
         locked_by = CASE WHEN {woken} THEN locked_by ELSE NULL END, \
         needs_wake = 0, recoveries = 0, updated_at = ?3, finished_at = ?7 \
         WHERE id = ?8 AND status = 'running' AND locked_by = ?9 \
         AND (?11 IS NULL OR attempt = ?11) RETURNING {RUN_COLS}"
    );
    let mut stmt = conn.prepare_cached(&sql).map_err(db)?;
    let mut rows = stmt
        .query(params![
            status.as_str(),
            wake_at,
            now,
            output,
            error,
            lease.until,
            finished_at,
            id.as_str(),
            lease.owner,
            !commit.timed_out_steps.is_empty(),
            attempt,
        ])
        .map_err(db)?;
    rows.next().map_err(db)?.map(run_from_row).transpose()
}

/// [`crate::store::Store::record_local_step`] inside the writer's transaction.
pub(super) fn record_local_step(
    conn: &Connection,
    scope: &Scope,
    id: &RunId,
    checkpoint: &NewCheckpoint,
) -> StoreResult<Wrote<bool>> {
    let open = run_by_id(conn, id)?
        .is_some_and(|run| scope.admits(&run.namespace) && !run.status.is_terminal());
    if !open {
        return Ok(Wrote::Keep(false));
    }
    let written = insert_checkpoints(conn, id, std::slice::from_ref(checkpoint), None)?;
    Ok(Wrote::Keep(written > 0))
}

/// Inserts `checkpoints`, keeping any already at their position; returns how many were new.
/// Dispatched steps are noted as sent by `owner`.
fn insert_checkpoints(
    conn: &Connection,
    id: &RunId,
    checkpoints: &[NewCheckpoint],
    owner: Option<&str>,
) -> StoreResult<usize> {
    let mut stmt = conn
        .prepare_cached(
            "INSERT INTO checkpoints (run_id, seq, kind, name, status, attempts, worker_group, \
             input, output, error, wake_at, enqueued_at, started_at, finished_at, retry_policy, \
             timeout_ms, dispatched_by) VALUES (?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) \
             ON CONFLICT (run_id, seq) DO NOTHING",
        )
        .map_err(db)?;
    let mut written = 0;
    for cp in checkpoints {
        written += stmt
            .execute(params![
                id.as_str(),
                i64::from(cp.seq),
                cp.kind.as_str(),
                cp.name,
                cp.status.as_str(),
                cp.worker_group,
                cp.input.as_ref().map(to_json),
                cp.output.as_ref().map(to_json),
                cp.error.as_ref().map(to_json),
                cp.wake_at,
                cp.enqueued_at,
                cp.started_at,
                cp.finished_at,
                cp.retry_policy.as_ref().map(to_json),
                cp.timeout_ms
                    .map(|ms| i64::try_from(ms).unwrap_or(i64::MAX)),
                cp.enqueued_at.and(owner),
            ])
            .map_err(db)?;
    }
    Ok(written)
}

/// Cancels `children` of run `id` (a fail-fast gather): waiting ones end `cancelled` and settle
/// the parent's wait, running ones go `cancelling`. A child that continued as new is cancelled
/// as its live successor (`<child>:c<n>`). Never touches a run that is not `id`'s child.
/// Returns the runs it cancelled or set cancelling.
fn cancel_children(
    conn: &Connection,
    id: &RunId,
    children: &[RunId],
    now: Millis,
) -> StoreResult<Vec<RunId>> {
    let mut changed = Vec::new();
    for child in children {
        // A child that continued as new is cancelled as its live successor, looked for only
        // then (a scan of the parent's children).
        let mut cancelled = cancel_child(conn, id, child, "id = ?1", now)?;
        if cancelled.is_none() && continued(conn, id, child)? {
            let successor = "substr(id, 1, length(?1) + 2) = ?1 || ':c'";
            cancelled = cancel_child(conn, id, child, successor, now)?;
        }
        if let Some(child) = cancelled {
            if settles_parent(child.status) {
                settle_parent(conn, id, &child, now)?;
            }
            changed.push(child.id);
        }
    }
    Ok(changed)
}

/// Whether `child`, a child of `parent`, continued as new.
fn continued(conn: &Connection, parent: &RunId, child: &RunId) -> StoreResult<bool> {
    let found: Option<i64> = optional(
        conn.prepare_cached(
            "SELECT 1 FROM runs WHERE id = ?1 AND parent_run_id = ?2 AND status = 'continued'",
        )
        .map_err(db)?
        .query_row(params![child.as_str(), parent.as_str()], |r| r.get(0)),
    )?;
    Ok(found.is_some())
}

/// Cancels the live child of run `parent` that `which` (a condition on `?1`, the child's id)
/// picks: waiting, it ends `cancelled`; running, it goes `cancelling`.
fn cancel_child(
    conn: &Connection,
    parent: &RunId,
    child: &RunId,
    which: &str,
    now: Millis,
) -> StoreResult<Option<Run>> {
    let sql = format!(
        "UPDATE runs SET status = CASE WHEN status = 'running' THEN 'cancelling' ELSE 'cancelled' END, \
         error = ?2, updated_at = ?3, \
         finished_at = CASE WHEN status = 'running' THEN finished_at ELSE ?3 END, wake_at = NULL \
         WHERE {which} AND parent_run_id = ?4 \
         AND status IN ('pending', 'suspended', 'blocked', 'running') RETURNING {RUN_COLS}"
    );
    let mut stmt = conn.prepare_cached(&sql).map_err(db)?;
    let mut rows = stmt
        .query(params![
            child.as_str(),
            to_json(&rules::sibling_failed(parent)),
            now,
            parent.as_str()
        ])
        .map_err(db)?;
    rows.next().map_err(db)?.map(run_from_row).transpose()
}

/// Fails the current try of remote step `seq` with `timeout`: retried by its policy (pending
/// again after the backoff), or failed for good. A result that arrives for a try that timed out
/// is still accepted while the step waits for its retry.
fn time_out_step(conn: &Connection, id: &RunId, seq: u32, now: Millis) -> StoreResult<()> {
    let timeout = rules::step_timed_out(seq);
    let result = StepResult {
        run_id: id.clone(),
        seq,
        step_id: step_id(id, seq),
        started_at: None,
        outcome: StepOutcome::Failed {
            error: timeout.clone(),
        },
    };
    if schedule_retry(conn, &result, &timeout, now)?.is_none() {
        let failed = Resolution::Failed(to_json(&timeout));
        resolve_pending(
            conn,
            id,
            i64::from(seq),
            CheckpointKind::RemoteStep,
            failed,
            now,
        )?;
    }
    Ok(())
}
