//! Recording a remote step's result, once, and waking (or claiming) its run; or, on the sticky
//! path, recording it with the turn it leads to.

use serde_json::Value;
use sqlx::PgConnection;

use super::reads::history;
use super::rows::{CHECKPOINT_COLS, RUN_COLS, checkpoint_from_row, db, run_from_row, to_value};
use super::settle::schedule_retry;
use super::sql::{Sql, push_scope};
use super::turn::{Holder, finish_turn, move_run};
use crate::model::{Checkpoint, CheckpointStatus, Millis, Run, RunStatus, StepOutcome, StepResult};
use crate::store::columns::RUN_COL_COUNT;
use crate::store::{Claim, Committed, StepApplied, StoreResult, TurnCommit};

/// [`crate::store::Store::apply_step_result`] inside a transaction; `None` means roll back.
pub(super) async fn apply_step_result(
    conn: &mut PgConnection,
    result: &StepResult,
    now: Millis,
    claim: Option<&Claim>,
) -> StoreResult<Option<StepApplied>> {
    let Some((run, claimed)) = wake_or_claim(conn, result, now, claim).await? else {
        return Ok(None);
    };
    let checkpoint = match &result.outcome {
        StepOutcome::Failed { error } => match schedule_retry(conn, result, error, now).await? {
            Some(cp) => Some(cp),
            None => record_result(conn, result, now).await?,
        },
        StepOutcome::Completed { .. } => record_result(conn, result, now).await?,
    };
    let Some(checkpoint) = checkpoint else {
        // Duplicate or unknown step: roll the wake-up (and any claim) back.
        return Ok(None);
    };
    let claimed = match claimed {
        true => Some(history(conn, &result.run_id).await?),
        false => None,
    };
    Ok(Some(StepApplied {
        run,
        claimed,
        checkpoint,
    }))
}

/// Wakes the result's run, claiming it under `claim` when it is suspended and inside the
/// claim's scope. `None` when the run ended; a parked run keeps the result and stays parked.
async fn wake_or_claim(
    conn: &mut PgConnection,
    result: &StepResult,
    now: Millis,
    claim: Option<&Claim>,
) -> StoreResult<Option<(Run, bool)>> {
    let mut sql = Sql::new("UPDATE runs SET updated_at = ");
    sql.push_bind(now);
    match claim {
        Some(claim) => {
            // One predicate, repeated for each column (SET expressions all see the old row).
            let claimable = |sql: &mut Sql| {
                sql.push(" CASE WHEN (status = 'suspended'");
                push_scope(sql, "namespace", &claim.scope);
                sql.push(") THEN ");
            };
            sql.push(", status =");
            claimable(&mut sql);
            sql.push("'running' ELSE status END, locked_by =");
            claimable(&mut sql);
            sql.push_bind(claim.owner.clone());
            sql.push(" ELSE locked_by END, locked_until =");
            claimable(&mut sql);
            sql.push_bind(claim.until);
            sql.push(" ELSE locked_until END, attempt = attempt +");
            claimable(&mut sql);
            sql.push("1 ELSE 0 END, needs_wake =");
            claimable(&mut sql);
            sql.push("FALSE ELSE TRUE END, wake_at =");
            claimable(&mut sql);
            sql.push("NULL WHEN status = 'suspended' THEN ");
            sql.push_bind(now);
            sql.push(" ELSE wake_at END");
        }
        None => {
            sql.push(", needs_wake = TRUE, wake_at = CASE WHEN status = 'suspended' THEN ");
            sql.push_bind(now);
            sql.push(" ELSE wake_at END");
        }
    }
    sql.push(" WHERE id = ");
    sql.push_bind(result.run_id.as_str().to_owned());
    sql.push(format!(
        " AND status IN ('pending', 'suspended', 'running', 'blocked') RETURNING {RUN_COLS}, needs_wake"
    ));
    let Some(row) = sql.build().fetch_optional(&mut *conn).await.map_err(db)? else {
        return Ok(None);
    };
    let needs_wake: bool = sqlx::Row::try_get(&row, RUN_COL_COUNT)
        .map_err(|e| crate::store::StoreError::Corrupt(e.to_string()))?;
    let run = run_from_row(&row)?;
    let claimed = claim.is_some_and(|c| {
        !needs_wake && run.status == RunStatus::Running && run.locked_by.as_ref() == Some(&c.owner)
    });
    Ok(Some((run, claimed)))
}

/// [`crate::store::Store::apply_result_and_commit`] inside a transaction; `None` means roll
/// back. The run is claimed and moved on by one update (taking its row lock first, as every
/// write of a run does), then the result is recorded.
pub(super) async fn apply_result_and_commit(
    conn: &mut PgConnection,
    result: &StepResult,
    lease: &Claim,
    attempt: u32,
    commit: &TurnCommit,
    now: Millis,
) -> StoreResult<Option<Committed>> {
    let holder = Holder::Untouched { attempt };
    let id = &result.run_id;
    let Some(run) = move_run(conn, lease, id, holder, Some(result), commit, now).await? else {
        return Ok(None);
    };
    finish_turn(conn, run, id, &lease.owner, commit, now).await
}

/// The status, output and error a result writes on its checkpoint.
pub(super) fn result_columns(
    result: &StepResult,
) -> (CheckpointStatus, Option<Value>, Option<Value>) {
    match &result.outcome {
        StepOutcome::Completed { output } => {
            (CheckpointStatus::Completed, Some(output.clone()), None)
        }
        StepOutcome::Failed { error } => (CheckpointStatus::Failed, None, Some(to_value(error))),
    }
}

/// The statement that records a result on its checkpoint, given the placeholders of its status,
/// output, error, finished_at, started_at, run id and seq: only a remote step still waiting
/// takes it.
pub(super) fn record_result_sql(p: [String; 7]) -> String {
    let [status, output, error, finished_at, started_at, run_id, seq] = p;
    format!(
        "UPDATE checkpoints SET status = {status}, output = {output}, error = {error}, \
         finished_at = {finished_at}, started_at = COALESCE({started_at}, started_at) \
         WHERE {}",
        waiting_step_sql(&run_id, &seq)
    )
}

/// The condition on `checkpoints` that picks remote step `seq` of run `run_id` (placeholders)
/// while it still waits for its result (pending or running).
pub(super) fn waiting_step_sql(run_id: &str, seq: &str) -> String {
    format!(
        "run_id = {run_id} AND seq = {seq} AND kind = 'remote_step' \
         AND status IN ('pending', 'running')"
    )
}

/// Resolves the result's checkpoint if it still waits; `None` for a late or duplicate result.
pub(super) async fn record_result(
    conn: &mut PgConnection,
    result: &StepResult,
    now: Millis,
) -> StoreResult<Option<Checkpoint>> {
    let (status, output, error) = result_columns(result);
    let placeholders = ["$1", "$2", "$3", "$4", "$5", "$6", "$7"].map(str::to_owned);
    let row = sqlx::query(&format!(
        "{} RETURNING {CHECKPOINT_COLS}",
        record_result_sql(placeholders)
    ))
    .bind(status.as_str())
    .bind(output)
    .bind(error)
    .bind(now)
    .bind(result.started_at)
    .bind(result.run_id.as_str())
    .bind(result.seq as i32)
    .fetch_optional(&mut *conn)
    .await
    .map_err(db)?;
    row.as_ref().map(checkpoint_from_row).transpose()
}
