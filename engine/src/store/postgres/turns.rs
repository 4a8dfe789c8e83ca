//! [`crate::store::Turns`]: the writes every run makes (starts, turns, step results), on the
//! statements of `turn.rs` and `result.rs`.

use async_trait::async_trait;

use super::PgStore;
use crate::model::{BufferedSignal, Millis, Run, RunId, Scope, StepResult};
use crate::store::{
    Claim, Committed, NewCheckpoint, NewRun, StepApplied, StoreResult, TurnCommit, Turns,
};

#[async_trait]
impl Turns for PgStore {
    async fn create_run(
        &self,
        run: NewRun,
        now: Millis,
        claim: Option<&Claim>,
    ) -> StoreResult<Run> {
        let lease = crate::store::rules::turn::start_lease(&run, claim);
        let id = run.id.clone();
        self.writer
            .write_as(true, (run, lease, now), |conn, (run, lease, now)| {
                let lease = lease
                    .as_ref()
                    .map(|(owner, until)| (owner.as_str(), *until));
                Box::pin(super::turn::create_run(conn, run, *now, lease))
            })
            .await?
            .ok_or_else(|| crate::store::rules::turn::id_taken(&id))
    }

    async fn commit_turn(
        &self,
        lease: &Claim,
        id: &RunId,
        attempt: u32,
        commit: TurnCommit,
        now: Millis,
    ) -> StoreResult<Option<Committed>> {
        let one_statement = super::turn::is_one_statement(id, &commit);
        let args = (lease.clone(), id.clone(), attempt, commit, now);
        self.writer
            .write_as(
                one_statement,
                args,
                |conn, (lease, id, attempt, commit, now)| {
                    Box::pin(super::turn::commit_turn(
                        conn, lease, id, *attempt, commit, *now,
                    ))
                },
            )
            .await
    }

    async fn create_run_and_commit(
        &self,
        run: NewRun,
        lease: &Claim,
        commit: TurnCommit,
        now: Millis,
    ) -> StoreResult<Option<Committed>> {
        if !lease.scope.admits(&run.namespace) {
            return Ok(None);
        }
        let id = run.id.clone();
        let one_statement = super::turn::is_one_statement(&id, &commit);
        let args = (run, lease.clone(), commit, now);
        let created = self
            .writer
            .write_merged(
                one_statement,
                super::merged::create_runs_and_commit,
                super::merged::id_of,
                args,
                super::merged::create_run_and_commit,
            )
            .await?;
        match created {
            Some(Some(committed)) => Ok(Some(committed)),
            Some(None) => Err(crate::store::rules::turn::id_taken(&id)),
            None => Ok(None),
        }
    }

    async fn apply_step_result(
        &self,
        result: &StepResult,
        now: Millis,
        claim: Option<&Claim>,
    ) -> StoreResult<Option<StepApplied>> {
        let args = (result.clone(), now, claim.cloned());
        self.writer
            .write(args, |conn, (result, now, claim)| {
                Box::pin(super::result::apply_step_result(
                    conn,
                    result,
                    *now,
                    claim.as_ref(),
                ))
            })
            .await
    }

    async fn apply_result_and_commit(
        &self,
        result: &StepResult,
        lease: &Claim,
        attempt: u32,
        commit: TurnCommit,
        now: Millis,
    ) -> StoreResult<Option<Committed>> {
        let one_statement = super::turn::is_one_statement(&result.run_id, &commit);
        let args = (result.clone(), lease.clone(), attempt, commit, now);
        self.writer
            .write_merged(
                one_statement,
                super::merged::apply_results_and_commit,
                super::merged::run_of,
                args,
                super::merged::apply_result_and_commit,
            )
            .await
    }

    async fn record_local_step(
        &self,
        scope: &Scope,
        id: &RunId,
        checkpoint: NewCheckpoint,
    ) -> StoreResult<bool> {
        let args = (scope.clone(), id.clone(), checkpoint);
        let written = self
            .writer
            .write(args, |conn, (scope, id, checkpoint)| {
                Box::pin(super::turn::record_local_step(conn, scope, id, checkpoint))
            })
            .await?;
        Ok(written.is_some())
    }

    async fn buffered_signals(&self, id: &RunId) -> StoreResult<Vec<BufferedSignal>> {
        super::reads::buffered_signals(&self.pool, id).await
    }
}
