//! Durable state: runs, checkpoints, and the dashboard's accounts.
//!
//! [`Store`] is the one seam every backend implements; every read path takes a [`Scope`] so a
//! tenant filter cannot be forgotten, and [`ScopedStore`] fixes that scope for a whole request.
//! Backends normalise their failures onto [`StoreError`].

mod accounts;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod columns;
mod error;
#[cfg(feature = "postgres")]
mod postgres;
mod records;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod rules;
mod scoped;
#[cfg(feature = "sqlite")]
mod sqlite;

#[cfg(any(test, feature = "test-util"))]
pub mod conformance;

use async_trait::async_trait;
use serde_json::Value;

use crate::model::{
    BufferedSignal, Checkpoint, Facets, Millis, NamespaceLoad, Run, RunId, RunPage, RunQuery,
    RunStatus, Scope, StatusCount, StepResult, ValueCount,
};

pub use accounts::{Accounts, NewUser, User};
pub use error::{StoreError, StoreResult};
#[cfg(feature = "postgres")]
pub use postgres::PgStore;
#[cfg(all(feature = "postgres", any(test, feature = "test-util")))]
pub use postgres::testing as postgres_testing;
pub use records::{
    Claim, Committed, History, LostDispatch, NewCheckpoint, NewRun, PendingStep, RunPatch,
    SignalSent, StepApplied, TurnCommit, TurnOutcome,
};
pub use scoped::ScopedStore;
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteStore;

/// Runs and checkpoints, as every backend stores them.
///
/// Status changes are compare-and-set: a method that moves a run names the statuses (and the
/// lease) it expects, and returns `None` when the run was not in them, so a stale driver can
/// never resurrect a finished run.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Whether reads can be confined to one namespace (see [`ScopedStore`]).
    fn supports_scoping(&self) -> bool;

    /// Inserts a new run: `pending`, or with `claim`, already `running` under that lease (the
    /// starter runs its first turn at once). Fails with [`StoreError::Conflict`] when the id
    /// exists.
    async fn create_run(&self, run: NewRun, now: Millis, claim: Option<&Claim>)
    -> StoreResult<Run>;

    /// One run, if it exists and `scope` admits its namespace.
    async fn get_run(&self, scope: &Scope, id: &RunId) -> StoreResult<Option<Run>>;

    /// A page of runs, newest first.
    async fn list_runs(&self, scope: &Scope, query: &RunQuery) -> StoreResult<RunPage>;

    /// How many runs are in each status (statuses with no runs are omitted).
    async fn count_by_status(&self, scope: &Scope) -> StoreResult<Vec<StatusCount>>;

    /// Per namespace in `scope`: runs pending, running, suspended and blocked now, and runs
    /// that failed or died at or after `failed_since`. Namespaces with none of these are left
    /// out. Served by status indexes, so it stays cheap however many runs have finished.
    async fn namespace_loads(
        &self,
        scope: &Scope,
        failed_since: Millis,
    ) -> StoreResult<Vec<NamespaceLoad>>;

    /// Counts by status, by workflow and by tag (the most used first), in `scope`.
    async fn facets(&self, scope: &Scope) -> StoreResult<Facets>;

    /// The most common values of search attribute `key` in `scope`, with their counts.
    async fn value_facets(&self, scope: &Scope, key: &str) -> StoreResult<Vec<ValueCount>>;

    /// A run's checkpoints in `seq` order; empty when the run is outside `scope`.
    async fn checkpoints(&self, scope: &Scope, id: &RunId) -> StoreResult<Vec<Checkpoint>>;

    /// Leases up to `limit` runs that need a turn: pending ones, suspended ones whose `wake_at`
    /// has passed, and running ones whose lease expired (a crashed driver's). They come back
    /// `running`, locked by `owner` until `now + lease_ms`. A run already recovered
    /// `max_recoveries` times is left for [`Store::sweep_abandoned`].
    async fn claim_runs(
        &self,
        scope: &Scope,
        owner: &str,
        now: Millis,
        lease_ms: i64,
        limit: u32,
        max_recoveries: u32,
    ) -> StoreResult<Vec<Run>>;

    /// Ends runs their drivers abandoned: a `running` run whose lease expired after
    /// `max_recoveries` recoveries becomes `dead`, and a `cancelling` run whose driver is gone
    /// becomes `cancelled`. Their parents are settled. Returns the runs it ended.
    async fn sweep_abandoned(
        &self,
        scope: &Scope,
        max_recoveries: u32,
        now: Millis,
    ) -> StoreResult<Vec<Run>>;

    /// Extends the leases `owner` holds on `ids`; returns how many were still held.
    async fn renew_leases(&self, owner: &str, ids: &[RunId], until: Millis) -> StoreResult<u64>;

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
    /// [`crate::runtime::turn::plan_turn`]), as [`Store::commit_turn`] would. Fails with
    /// [`StoreError::Conflict`] when the id exists; `None` when `lease.scope` does not admit the
    /// run's namespace. Either way nothing is written.
    async fn create_run_and_commit(
        &self,
        run: NewRun,
        lease: &Claim,
        commit: TurnCommit,
        now: Millis,
    ) -> StoreResult<Option<Committed>>;

    /// Remote steps in `scope` still waiting for a result whose dispatch `lost` says may be
    /// lost, oldest dispatch first.
    async fn pending_remote_steps(
        &self,
        scope: &Scope,
        lost: &LostDispatch,
        limit: u32,
    ) -> StoreResult<Vec<PendingStep>>;

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

    /// Notes a worker's beat for remote step `seq` of run `id` (wire §2.6): its dispatch time
    /// moves to `now`, so its timeout and the lost-dispatch check count from the beat. Only a
    /// pending step dispatched to routing token `group`, of a run in `scope`: a worker of one
    /// tenant cannot keep another tenant's step alive. Returns whether the step was found.
    async fn beat_step(
        &self,
        scope: &Scope,
        id: &RunId,
        seq: u32,
        group: &str,
        now: Millis,
    ) -> StoreResult<bool>;

    /// Notes that driver `by` (re)dispatched a remote step at `now`.
    async fn mark_dispatched(&self, id: &RunId, seq: u32, by: &str, now: Millis)
    -> StoreResult<()>;

    /// Notes that driver `owner` is alive until `alive_until`. The remote steps it dispatches
    /// count as lost once that passes (see [`LostDispatch::senders_gone_at`]): a transport that
    /// keeps tasks in its sender's memory loses them with the sender. A driver that stops
    /// cleanly beats with `alive_until = now`, so its steps are sent again at once.
    ///
    /// Returns how many other drivers are alive at `now` (their heartbeat has not lapsed): the
    /// other control planes on this store, which share its runs and, on a shared broker, its
    /// step results.
    async fn beat_driver(&self, owner: &str, alive_until: Millis, now: Millis) -> StoreResult<u32>;

    /// The earliest `wake_at` among suspended runs in `scope`, to sleep until then.
    async fn next_wake_at(&self, scope: &Scope) -> StoreResult<Option<Millis>>;

    /// Compare-and-set: moves run `id` (if `scope` sees it and its status is one of `expected`)
    /// to `patch.status`. `None` when the run is invisible or in another status, so a stale
    /// caller can never resurrect a finished run.
    async fn update_run_if(
        &self,
        scope: &Scope,
        id: &RunId,
        expected: &[RunStatus],
        patch: RunPatch,
        now: Millis,
    ) -> StoreResult<Option<Run>>;

    /// Re-drives a failed or dead run from its last good checkpoint: the run goes back to
    /// `pending` and its failed checkpoints (and anything after the first) are dropped, so they
    /// run again. `None` when the run is invisible or not failed/dead.
    async fn retry_run(&self, scope: &Scope, id: &RunId, now: Millis) -> StoreResult<Option<Run>>;

    /// Buffers signal `name` for run `id` (if `scope` sees it and it has not ended) and wakes the
    /// run. A signal sent before the run waits for it is kept until a wait consumes it.
    async fn send_signal(
        &self,
        scope: &Scope,
        id: &RunId,
        name: &str,
        payload: &Value,
        now: Millis,
    ) -> StoreResult<SignalSent>;

    /// The run's buffered, not yet consumed signals, in delivery order.
    async fn buffered_signals(&self, id: &RunId) -> StoreResult<Vec<BufferedSignal>>;

    /// Moves `blocked` runs in `scope` whose recheck time (`wake_at`) has passed back to
    /// `pending`, so their next turn looks again at what parked them: a dispatch no live worker
    /// could take. They keep their reason, so that turn can tell a recheck (and stay quiet if
    /// it parks them again). Runs parked with no recheck time (an unserved version) stay
    /// parked.
    async fn wake_blocked(&self, scope: &Scope, now: Millis) -> StoreResult<Vec<Run>>;

    /// Un-parks `blocked` runs in `scope` whose `(workflow, version)` is in `served` (a process
    /// that runs them has started): they go back to `pending`. Returns them. Runs with a recheck
    /// time are left to [`Store::wake_blocked`]: a served version does not help them.
    async fn unblock_runs(
        &self,
        scope: &Scope,
        served: &[(String, u32)],
        now: Millis,
    ) -> StoreResult<Vec<Run>>;

    /// Gives up `owner`'s leases so another driver (or a restart) takes the runs over at once.
    async fn release_leases(&self, owner: &str, now: Millis) -> StoreResult<u64>;
}
