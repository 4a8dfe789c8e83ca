//! Recording a remote step's result, once, and waking (or claiming) its run.

use sqlx::sqlite::SqliteRow;
use sqlx::{QueryBuilder, Row, Sqlite, SqliteConnection};

use super::push_scope;
use super::rows::{CHECKPOINT_COLS, RUN_COLS, checkpoint_from_row, db, run_from_row, to_json};
use super::settle::schedule_retry;
use super::writer::Wrote;
use crate::model::{CheckpointStatus, Millis, RunStatus, StepOutcome, StepResult};
use crate::store::{Claim, StepApplied, StoreError, StoreResult};

/// [`crate::store::Store::apply_step_result`] on the writer's connection.
pub(super) async fn apply_step_result(
    conn: &mut SqliteConnection,
    result: StepResult,
    now: Millis,
    claim: Option<Claim>,
) -> StoreResult<Wrote<Option<StepApplied>>> {
    let result = &result;
    // Wake the run first: a result for a finished, cancelled or parked run is dropped. A
    // suspended run in the claimer's scope is claimed in the same statement.
    let mut qb = QueryBuilder::new("UPDATE runs SET updated_at = ");
    qb.push_bind(now);
    match &claim {
        Some(claim) => {
            // One predicate, pushed for each column (SET expressions all see the old row).
            let claimable = |qb: &mut QueryBuilder<'_, Sqlite>| {
                qb.push(" CASE WHEN (status = 'suspended'");
                push_scope(qb, "namespace", &claim.scope);
                qb.push(") THEN ");
            };
            qb.push(", status =");
            claimable(&mut qb);
            qb.push("'running' ELSE status END, locked_by =");
            claimable(&mut qb);
            qb.push_bind(claim.owner.clone());
            qb.push(" ELSE locked_by END, locked_until =");
            claimable(&mut qb);
            qb.push_bind(claim.until);
            qb.push(" ELSE locked_until END, attempt = attempt +");
            claimable(&mut qb);
            qb.push("1 ELSE 0 END, needs_wake =");
            claimable(&mut qb);
            qb.push("0 ELSE 1 END, wake_at =");
            claimable(&mut qb);
            qb.push("NULL WHEN status = 'suspended' THEN ");
            qb.push_bind(now);
            qb.push(" ELSE wake_at END");
        }
        None => {
            qb.push(", needs_wake = 1, wake_at = CASE WHEN status = 'suspended' THEN ");
            qb.push_bind(now);
            qb.push(" ELSE wake_at END");
        }
    }
    qb.push(" WHERE id = ")
        .push_bind(result.run_id.as_str().to_owned());
    qb.push(format!(
        " AND status IN ('pending', 'suspended', 'running') RETURNING {RUN_COLS}, needs_wake"
    ));
    let Some(run_row) = qb.build().fetch_optional(&mut *conn).await.map_err(db)? else {
        return Ok(Wrote::Discard(None));
    };
    if let StepOutcome::Failed { error } = &result.outcome
        && let Some(cp_row) = schedule_retry(conn, result, error, now).await?
    {
        return applied(&run_row, &cp_row, claim.as_ref());
    }
    let (status, output, error) = match &result.outcome {
        StepOutcome::Completed { output } => {
            (CheckpointStatus::Completed, Some(to_json(output)), None)
        }
        StepOutcome::Failed { error } => (CheckpointStatus::Failed, None, Some(to_json(error))),
    };
    let sql = format!(
        "UPDATE checkpoints SET status = ?, output = ?, error = ?, finished_at = ?, \
         started_at = COALESCE(?, started_at) \
         WHERE run_id = ? AND seq = ? AND kind = 'remote_step' AND status IN ('pending', 'running') \
         RETURNING {CHECKPOINT_COLS}"
    );
    let Some(cp_row) = sqlx::query(&sql)
        .bind(status.as_str())
        .bind(output)
        .bind(error)
        .bind(now)
        .bind(result.started_at)
        .bind(result.run_id.as_str())
        .bind(i64::from(result.seq))
        .fetch_optional(&mut *conn)
        .await
        .map_err(db)?
    else {
        // Duplicate or unknown step: roll the wake-up (and any claim) back.
        return Ok(Wrote::Discard(None));
    };
    applied(&run_row, &cp_row, claim.as_ref())
}

/// The answer: claimed when the wake-up took the lease, which (unlike a plain wake-up, which
/// sets `needs_wake`) leaves `needs_wake` clear on a `running` run.
fn applied(
    run: &SqliteRow,
    checkpoint: &SqliteRow,
    claim: Option<&Claim>,
) -> StoreResult<Wrote<Option<StepApplied>>> {
    let needs_wake: bool = run
        .try_get("needs_wake")
        .map_err(|e| StoreError::Corrupt(e.to_string()))?;
    let run = run_from_row(run)?;
    let claimed = claim.is_some_and(|c| {
        !needs_wake && run.status == RunStatus::Running && run.locked_by.as_ref() == Some(&c.owner)
    });
    Ok(Wrote::Keep(Some(StepApplied {
        run,
        claimed,
        checkpoint: checkpoint_from_row(checkpoint)?,
    })))
}
