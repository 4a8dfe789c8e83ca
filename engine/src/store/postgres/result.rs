//! Recording a remote step's result, once, and waking (or claiming) its run; or, on the sticky
//! path, recording it with the turn it leads to. The rules are `rules::result`'s; these are its
//! statements.

use sqlx::PgConnection;

use super::fused::{Holder, move_run, record_result_sql};
use super::rows::{CHECKPOINT_COLS, RUN_COLS, checkpoint_from_row, db, run_from_row};
use super::sql::{Sql, push_scope};
use crate::model::{Checkpoint, Millis, Run, StepResult};
use crate::store::columns::RUN_COL_COUNT;
use crate::store::rules::result::{self, ResultStatements, columns};
use crate::store::rules::turn;
use crate::store::{Claim, Committed, StepApplied, StoreError, StoreResult, TurnCommit};

/// [`crate::store::Store::apply_step_result`] inside a transaction; `None` means roll back.
pub(super) async fn apply_step_result(
    conn: &mut PgConnection,
    result: &StepResult,
    now: Millis,
    claim: Option<&Claim>,
) -> StoreResult<Option<StepApplied>> {
    result::apply_step_result(conn, result, now, claim).await
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
    turn::finish(conn, run, id, &lease.owner, commit, now).await
}

impl ResultStatements for PgConnection {
    async fn wake_or_claim(
        &mut self,
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
        let Some(row) = sql.build().fetch_optional(&mut *self).await.map_err(db)? else {
            return Ok(None);
        };
        let needs_wake: bool = sqlx::Row::try_get(&row, RUN_COL_COUNT)
            .map_err(|e| StoreError::Corrupt(e.to_string()))?;
        Ok(Some((run_from_row(&row)?, needs_wake)))
    }

    async fn record_result(
        &mut self,
        result: &StepResult,
        now: Millis,
    ) -> StoreResult<Option<Checkpoint>> {
        let (status, output, error) = columns::<Self>(result);
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
        .fetch_optional(&mut *self)
        .await
        .map_err(db)?;
        row.as_ref().map(checkpoint_from_row).transpose()
    }
}
