//! Resolving waits: step retries, pending checkpoints and a parent's wait on its child. The
//! rules are `rules::settle`'s; these are its statements.

use rusqlite::{Connection, params};
use serde::Serialize;

use super::result::push_try_of;
use super::rows::{checkpoint_from_row, from_json, to_json};
use super::sql::db;
use super::sql::{Sql, optional};
use crate::model::{
    Checkpoint, CheckpointKind, Millis, RetryPolicy, RunId, StepFailure, StepResult,
};
use crate::store::StoreResult;
use crate::store::rules::settle::{Resolution, Settle};

impl Settle for Connection {
    type Json = String;

    fn json<T: Serialize>(value: &T) -> String {
        to_json(value)
    }

    async fn resolve_pending(
        &mut self,
        run: &RunId,
        seq: i64,
        kind: CheckpointKind,
        resolution: Resolution<String>,
        now: Millis,
    ) -> StoreResult<u64> {
        let (status, output, error) = resolution.columns();
        let changed = self
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

    async fn wake(&mut self, id: &RunId, now: Millis) -> StoreResult<u64> {
        let changed = self
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

    async fn tries(
        &mut self,
        run: &RunId,
        seq: u32,
    ) -> StoreResult<Option<(u32, Option<RetryPolicy>)>> {
        let row = optional(
            self.prepare_cached(
                "SELECT attempts, retry_policy FROM checkpoints \
                 WHERE run_id = ? AND seq = ? AND kind = 'remote_step' AND status IN ('pending', 'running')",
            )
            .map_err(db)?
            .query_row(params![run.as_str(), i64::from(seq)], |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, Option<String>>(1)?))
            }),
        )?;
        let Some((attempts, policy)) = row else {
            return Ok(None);
        };
        let policy = policy
            .map(|p| from_json(&p, "checkpoint retry policy"))
            .transpose()?;
        Ok(Some((u32::try_from(attempts).unwrap_or(u32::MAX), policy)))
    }

    async fn retry_at(
        &mut self,
        result: &StepResult,
        error: &StepFailure,
        due: Millis,
    ) -> StoreResult<Option<Checkpoint>> {
        let mut sql = Sql::new(
            "UPDATE checkpoints SET attempts = attempts + 1, enqueued_at = NULL, wake_at = ",
        );
        sql.bind(due).push(", error = ").bind(to_json(error));
        push_try_of(&mut sql, result);
        sql.one(self, checkpoint_from_row)
    }
}
