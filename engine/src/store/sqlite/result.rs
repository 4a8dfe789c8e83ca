//! Recording a remote step's result, once, and waking (or claiming) its run; or, on the sticky
//! path, recording it with the turn it leads to. The rules are `rules::result`'s; these are its
//! statements.

use rusqlite::Connection;

use super::rows::{CHECKPOINT_COLS, RUN_COLS, checkpoint_from_row, col, run_from_row};
use super::sql::Sql;
use super::turn;
use super::writer::{Wrote, at_once};
use crate::model::{Checkpoint, Millis, Run, StepResult};
use crate::store::rules::result::{self, ResultStatements, columns};
use crate::store::{Claim, Committed, StepApplied, StoreResult, TurnCommit};

/// [`crate::store::Store::apply_step_result`] inside the writer's transaction.
pub(super) fn apply_step_result(
    conn: &mut Connection,
    result: &StepResult,
    now: Millis,
    claim: Option<&Claim>,
) -> StoreResult<Wrote<Option<StepApplied>>> {
    let applied = at_once(result::apply_step_result(conn, result, now, claim))?;
    Ok(Wrote::unless_none(applied))
}

/// [`crate::store::Store::apply_result_and_commit`] inside the writer's transaction.
pub(super) fn apply_result_and_commit(
    conn: &mut Connection,
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
    if sql.execute(conn)? == 0 || at_once(conn.record_result(result, now))?.is_none() {
        return Ok(Wrote::Discard(None));
    }
    match turn::commit_turn(conn, lease, &result.run_id, None, commit, now)? {
        Wrote::Keep(committed) => Ok(Wrote::Keep(committed)),
        Wrote::Discard(_) => Ok(Wrote::Discard(None)),
    }
}

/// Appends what every write of a try's outcome on its step ends with: `started_at` from
/// `result` (kept when it has none), only on `result`'s remote step while it still waits
/// (pending or running), returning the checkpoint.
pub(super) fn push_try_of(sql: &mut Sql, result: &StepResult) {
    sql.push(", started_at = COALESCE(")
        .bind(result.started_at)
        .push(", started_at) WHERE run_id = ")
        .bind(result.run_id.as_str().to_owned())
        .push(" AND seq = ")
        .bind(i64::from(result.seq))
        .push(&format!(
            " AND kind = 'remote_step' AND status IN ('pending', 'running') RETURNING {CHECKPOINT_COLS}"
        ));
}

impl ResultStatements for Connection {
    async fn wake_or_claim(
        &mut self,
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
        sql.one(self, |row| {
            Ok((run_from_row(row)?, col(row, "needs_wake")?))
        })
    }

    async fn record_result(
        &mut self,
        result: &StepResult,
        now: Millis,
    ) -> StoreResult<Option<Checkpoint>> {
        let (status, output, error) = columns::<Self>(result);
        let mut sql = Sql::new("UPDATE checkpoints SET status = ");
        sql.bind(status.as_str().to_owned())
            .push(", output = ")
            .bind(output)
            .push(", error = ")
            .bind(error)
            .push(", finished_at = ")
            .bind(now);
        push_try_of(&mut sql, result);
        sql.one(self, checkpoint_from_row)
    }
}
