//! Recording a remote step's result, once, and waking (or claiming) its run.

use rusqlite::Connection;

use super::reads::history;
use super::rows::{CHECKPOINT_COLS, RUN_COLS, checkpoint_from_row, col, run_from_row, to_json};
use super::settle::schedule_retry;
use super::sql::Sql;
use super::turn;
use super::writer::Wrote;
use crate::model::{Checkpoint, CheckpointStatus, Millis, Run, RunStatus, StepOutcome, StepResult};
use crate::store::{Claim, Committed, StepApplied, StoreResult, TurnCommit};

/// [`crate::store::Store::apply_step_result`] inside the writer's transaction.
pub(super) fn apply_step_result(
    conn: &Connection,
    result: &StepResult,
    now: Millis,
    claim: Option<&Claim>,
) -> StoreResult<Wrote<Option<StepApplied>>> {
    // Wake the run first: a result for a finished or cancelled run is dropped; a parked run
    // keeps it for its next turn.
    let Some((run, claimed)) = wake_or_claim(conn, result, now, claim)? else {
        return Ok(Wrote::Discard(None));
    };
    if let StepOutcome::Failed { error } = &result.outcome
        && let Some(checkpoint) = schedule_retry(conn, result, error, now)?
    {
        let claimed = claimed.then(|| history(conn, &result.run_id)).transpose()?;
        return Ok(Wrote::Keep(Some(StepApplied {
            run,
            claimed,
            checkpoint,
        })));
    }
    let Some(checkpoint) = record_result(conn, result, now)? else {
        // Duplicate or unknown step: roll the wake-up (and any claim) back.
        return Ok(Wrote::Discard(None));
    };
    let claimed = claimed.then(|| history(conn, &result.run_id)).transpose()?;
    Ok(Wrote::Keep(Some(StepApplied {
        run,
        claimed,
        checkpoint,
    })))
}

/// Resolves the result's checkpoint if it still waits; `None` for a late or duplicate result.
fn record_result(
    conn: &Connection,
    result: &StepResult,
    now: Millis,
) -> StoreResult<Option<Checkpoint>> {
    let (status, output, error) = match &result.outcome {
        StepOutcome::Completed { output } => {
            (CheckpointStatus::Completed, Some(to_json(output)), None)
        }
        StepOutcome::Failed { error } => (CheckpointStatus::Failed, None, Some(to_json(error))),
    };
    let mut sql = Sql::new("UPDATE checkpoints SET status = ");
    sql.bind(status.as_str().to_owned())
        .push(", output = ")
        .bind(output)
        .push(", error = ")
        .bind(error)
        .push(", finished_at = ")
        .bind(now)
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

/// [`crate::store::Store::apply_result_and_commit`] inside the writer's transaction.
pub(super) fn apply_result_and_commit(
    conn: &Connection,
    result: &StepResult,
    lease: &Claim,
    attempt: u32,
    commit: &TurnCommit,
    now: Millis,
) -> StoreResult<Wrote<Option<Committed>>> {
    let mut sql = Sql::new("UPDATE runs SET status = 'running', locked_by = ");
    sql.bind(lease.owner.clone())
        .push(", locked_until = ")
        .bind(lease.until)
        .push(", attempt = attempt + 1, wake_at = NULL, updated_at = ")
        .bind(now)
        .push(" WHERE id = ")
        .bind(result.run_id.as_str().to_owned())
        .push(" AND status = 'suspended' AND needs_wake = 0 AND attempt = ")
        .bind(i64::from(attempt))
        .scope("namespace", &lease.scope);
    if sql.execute(conn)? == 0 || record_result(conn, result, now)?.is_none() {
        return Ok(Wrote::Discard(None));
    }
    match turn::commit_turn(conn, lease, &result.run_id, None, commit, now)? {
        Wrote::Keep(committed) => Ok(Wrote::Keep(committed)),
        Wrote::Discard(_) => Ok(Wrote::Discard(None)),
    }
}

/// Wakes the result's run, claiming it under `claim` when it is suspended and inside the
/// claim's scope. `None` when the run ended; a parked run keeps the result and stays parked.
/// The flag says whether it was claimed: a claim leaves `needs_wake` clear on a `running` run,
/// a plain wake-up always sets it.
fn wake_or_claim(
    conn: &Connection,
    result: &StepResult,
    now: Millis,
    claim: Option<&Claim>,
) -> StoreResult<Option<(Run, bool)>> {
    let mut sql = Sql::new("UPDATE runs SET updated_at = ");
    sql.bind(now);
    match claim {
        Some(claim) => {
            // One predicate, repeated for each column (SET expressions all see the old row).
            let claimable = |sql: &mut Sql| {
                sql.push(" CASE WHEN (status = 'suspended'")
                    .scope("namespace", &claim.scope)
                    .push(") THEN ");
            };
            sql.push(", status =");
            claimable(&mut sql);
            sql.push("'running' ELSE status END, locked_by =");
            claimable(&mut sql);
            sql.bind(claim.owner.clone())
                .push(" ELSE locked_by END, locked_until =");
            claimable(&mut sql);
            sql.bind(claim.until)
                .push(" ELSE locked_until END, attempt = attempt +");
            claimable(&mut sql);
            sql.push("1 ELSE 0 END, needs_wake =");
            claimable(&mut sql);
            sql.push("0 ELSE 1 END, wake_at =");
            claimable(&mut sql);
            sql.push("NULL WHEN status = 'suspended' THEN ")
                .bind(now)
                .push(" ELSE wake_at END");
        }
        None => {
            sql.push(", needs_wake = 1, wake_at = CASE WHEN status = 'suspended' THEN ")
                .bind(now)
                .push(" ELSE wake_at END");
        }
    }
    sql.push(" WHERE id = ")
        .bind(result.run_id.as_str().to_owned())
        .push(&format!(
            " AND status IN ('pending', 'suspended', 'running', 'blocked') RETURNING {RUN_COLS}, needs_wake"
        ));
    sql.one(conn, |row| {
        let needs_wake: bool = col(row, "needs_wake")?;
        let run = run_from_row(row)?;
        let claimed = claim.is_some_and(|c| {
            !needs_wake
                && run.status == RunStatus::Running
                && run.locked_by.as_ref() == Some(&c.owner)
        });
        Ok((run, claimed))
    })
}
