//! Writing what turns decide: a run's insert (with its first turn), a turn's commit, a step
//! result on its own or with the turn it leads to, and a local step a worker reports early.
//! Every write is compare-and-set on the run's status and claim.

use crate::model::Run;
use crate::model::{BufferedSignal, Millis, RunId, Scope, StepResult};
use crate::store::{Claim, Committed, NewCheckpoint, NewRun, StepApplied, StoreResult, TurnCommit};
use async_trait::async_trait;

/// The driver's write path: inserts, turn commits and step results.
#[async_trait]
pub trait Turns: Send + Sync + 'static {
    /// Inserts a new run: `pending`, or with `claim`, already `running` under that lease (the
    /// starter runs its first turn at once). Fails with [`StoreError::Conflict`] when the id
    /// exists.
    async fn create_run(&self, run: NewRun, now: Millis, claim: Option<&Claim>)
    -> StoreResult<Run>;

    /// Persists the outcome of a turn atomically: new checkpoints (existing `seq`s are kept) and
    /// the run's next status. `None` when `lease.owner` no longer holds the run's lease at
    /// `attempt`, the attempt of the claim the turn was computed under: a turn that outlived its
    /// lease cannot commit, even if the same owner has claimed the run again since.
    ///
    /// A run that would suspend but was woken during the turn (a result or signal landed, or its
    /// timer is already due) stays `running` under `lease` instead: the caller runs its next
    /// turn at once.
    async fn commit_turn(
        &self,
        lease: &Claim,
        id: &RunId,
        attempt: u32,
        commit: TurnCommit,
        now: Millis,
    ) -> StoreResult<Option<Committed>>;

    /// Records a remote step's result, once: only a checkpoint still waiting accepts it, and the
    /// run is woken; a suspended run in `claim`'s scope is claimed for it, and a `blocked` run
    /// keeps it for the turn after it is un-parked. `None` when the result was late or a
    /// duplicate, or its run ended.
    async fn apply_step_result(
        &self,
        result: &StepResult,
        now: Millis,
        claim: Option<&Claim>,
    ) -> StoreResult<Option<StepApplied>>;

    /// The sticky fast path: records a step's `result` and persists `commit`, the turn the
    /// caller computed from its cached copy of the run's history with that result applied, in
    /// one write. Only if the run is exactly as the caller last left it: `suspended`, in
    /// `lease.scope`, not woken since, and claimed `attempt` times (nobody else turned it). `None`
    /// when anything differs, and nothing is written: the caller applies the result the
    /// ordinary way.
    async fn apply_result_and_commit(
        &self,
        result: &StepResult,
        lease: &Claim,
        attempt: u32,
        commit: TurnCommit,
        now: Millis,
    ) -> StoreResult<Option<Committed>>;

    /// A start and its run's first turn in one write: inserts `run` already claimed under
    /// `lease` and persists `commit`, the turn computed for it from an empty history (see
    /// [`crate::runtime::turn::dry_turn`]), as [`Store::commit_turn`] would. Fails with
    /// [`StoreError::Conflict`] when the id exists; `None` when `lease.scope` does not admit the
    /// run's namespace. Either way nothing is written.
    async fn create_run_and_commit(
        &self,
        run: NewRun,
        lease: &Claim,
        commit: TurnCommit,
        now: Millis,
    ) -> StoreResult<Option<Committed>>;

    /// Checkpoints a local step a worker reports finished inside a turn (wire §3.7), before
    /// the turn's decision arrives, so a turn sent again replays it instead of running it twice.
    /// Written only when the run is in `scope`, has not ended, and has nothing at that position
    /// (the decision's own record of the step then changes nothing). Returns whether it was.
    async fn record_local_step(
        &self,
        scope: &Scope,
        id: &RunId,
        checkpoint: NewCheckpoint,
    ) -> StoreResult<bool>;

    /// The run's buffered, not yet consumed signals, in delivery order.
    async fn buffered_signals(&self, id: &RunId) -> StoreResult<Vec<BufferedSignal>>;
}
