//! [`crate::store::Turns`]: the writes every run makes (starts, turns, step results), on the
//! statements of `turn.rs` and `result.rs`.

use async_trait::async_trait;

use super::SqliteStore;
use crate::model::{BufferedSignal, Millis, Run, RunId, Scope, StepResult};
use crate::store::{
    Claim, Committed, NewCheckpoint, NewRun, StepApplied, StoreResult, TurnCommit, Turns,
};

#[async_trait]
impl Turns for SqliteStore {
    async fn create_run(
        &self,
        run: NewRun,
        now: Millis,
        claim: Option<&Claim>,
    ) -> StoreResult<Run> {
        let lease = crate::store::rules::turn::start_lease(&run, claim);
        self.writer
            .write(move |conn| {
                let lease = lease
                    .as_ref()
                    .map(|(owner, until)| (owner.as_str(), *until));
                super::turn::create_run(conn, &run, now, lease)
            })
            .await
    }

    async fn commit_turn(
        &self,
        lease: &Claim,
        id: &RunId,
        attempt: u32,
        commit: TurnCommit,
        now: Millis,
    ) -> StoreResult<Option<Committed>> {
        let (lease, id) = (lease.clone(), id.clone());
        self.writer
            .write(move |conn| {
                super::turn::commit_turn(conn, &lease, &id, Some(attempt), &commit, now)
            })
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
        let lease = lease.clone();
        self.writer
            .write(move |conn| super::turn::create_run_and_commit(conn, &run, &lease, &commit, now))
            .await
    }

    async fn apply_step_result(
        &self,
        result: &StepResult,
        now: Millis,
        claim: Option<&Claim>,
    ) -> StoreResult<Option<StepApplied>> {
        let (result, claim) = (result.clone(), claim.cloned());
        self.writer
            .write(move |conn| super::result::apply_step_result(conn, &result, now, claim.as_ref()))
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
        let (result, lease) = (result.clone(), lease.clone());
        self.writer
            .write(move |conn| {
                super::result::apply_result_and_commit(conn, &result, &lease, attempt, &commit, now)
            })
            .await
    }

    async fn record_local_step(
        &self,
        scope: &Scope,
        id: &RunId,
        checkpoint: NewCheckpoint,
    ) -> StoreResult<bool> {
        let (scope, id) = (scope.clone(), id.clone());
        self.writer
            .write(move |conn| super::turn::record_local_step(conn, &scope, &id, &checkpoint))
            .await
    }

    async fn buffered_signals(&self, id: &RunId) -> StoreResult<Vec<BufferedSignal>> {
        let id = id.clone();
        self.readers
            .read(move |conn| super::reads::buffered_signals(conn, &id))
            .await
    }
}
