//! Resolving waits: step retries, pending checkpoints and a parent's wait on its child. The
//! rules are `rules::settle`'s; these are its statements.

use serde::Serialize;
use serde_json::Value;
use sqlx::PgConnection;

use super::fused::waiting_step_sql;
use super::rows::{CHECKPOINT_COLS, checkpoint_from_row, db};
use super::values::to_value;
use crate::model::{
    Checkpoint, CheckpointKind, Millis, RetryPolicy, RunId, StepFailure, StepResult,
};
use crate::store::rules::settle::{Resolution, Settle};
use crate::store::{StoreError, StoreResult};

impl Settle for PgConnection {
    type Json = Value;

    fn json<T: Serialize>(value: &T) -> Value {
        to_value(value)
    }

    async fn resolve_pending(
        &mut self,
        run: &RunId,
        seq: i64,
        kind: CheckpointKind,
        resolution: Resolution<Value>,
        now: Millis,
    ) -> StoreResult<u64> {
        let (status, output, error) = resolution.columns();
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
        .execute(&mut *self)
        .await
        .map_err(db)?;
        Ok(done.rows_affected())
    }

    async fn wake(&mut self, id: &RunId, now: Millis) -> StoreResult<u64> {
        let done = sqlx::query(
            "UPDATE runs SET needs_wake = TRUE, updated_at = $1, \
             wake_at = CASE WHEN status = 'suspended' THEN $1 ELSE wake_at END \
             WHERE id = $2 AND status IN ('pending', 'suspended', 'running')",
        )
        .bind(now)
        .bind(id.as_str())
        .execute(&mut *self)
        .await
        .map_err(db)?;
        Ok(done.rows_affected())
    }

    async fn tries(
        &mut self,
        run: &RunId,
        seq: u32,
    ) -> StoreResult<Option<(u32, Option<RetryPolicy>)>> {
        let row: Option<(i32, Option<Value>)> = sqlx::query_as(&format!(
            "SELECT attempts, retry_policy FROM checkpoints WHERE {} FOR UPDATE",
            waiting_step_sql("$1", "$2")
        ))
        .bind(run.as_str())
        .bind(seq as i32)
        .fetch_optional(&mut *self)
        .await
        .map_err(db)?;
        let Some((attempts, policy)) = row else {
            return Ok(None);
        };
        let policy = policy
            .map(serde_json::from_value::<RetryPolicy>)
            .transpose()
            .map_err(|e| StoreError::Corrupt(format!("checkpoint retry policy: {e}")))?;
        Ok(Some((u32::try_from(attempts).unwrap_or(u32::MAX), policy)))
    }

    async fn retry_at(
        &mut self,
        result: &StepResult,
        error: &StepFailure,
        due: Millis,
    ) -> StoreResult<Option<Checkpoint>> {
        let row = sqlx::query(&format!(
            "UPDATE checkpoints SET attempts = attempts + 1, enqueued_at = NULL, wake_at = $1, \
             error = $2, started_at = COALESCE($3, started_at) WHERE {} RETURNING {CHECKPOINT_COLS}",
            waiting_step_sql("$4", "$5")
        ))
        .bind(due)
        .bind(to_value(error))
        .bind(result.started_at)
        .bind(result.run_id.as_str())
        .bind(result.seq as i32)
        .fetch_optional(&mut *self)
        .await
        .map_err(db)?;
        row.as_ref().map(checkpoint_from_row).transpose()
    }
}
