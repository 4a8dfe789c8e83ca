//! Reading runs, for the dashboard, the API and the wire: every read takes a [`Scope`], so a
//! tenant filter cannot be forgotten (and [`crate::store::ScopedStore`] fixes it for a request).

use crate::model::{
    ActivityMinute, Checkpoint, Facets, Millis, NamespaceLoad, Run, RunCount, RunId, RunPage,
    RunQuery, RunTotals, Scope, StatusCount, ValueCount,
};
use crate::store::StoreResult;
use async_trait::async_trait;

/// Scoped reads of runs, their checkpoints and the counts the dashboard shows.
#[async_trait]
pub trait RunReads: Send + Sync + 'static {
    /// One run, if it exists and `scope` admits its namespace.
    async fn get_run(&self, scope: &Scope, id: &RunId) -> StoreResult<Option<Run>>;

    /// A page of runs, newest first.
    async fn list_runs(&self, scope: &Scope, query: &RunQuery) -> StoreResult<RunPage>;

    /// How many runs are in each status (statuses with no runs are omitted).
    async fn count_by_status(&self, scope: &Scope) -> StoreResult<Vec<StatusCount>>;

    /// How many runs of each workflow of each namespace in `scope` are in each status (none are
    /// left out as zero). Read from the counts the store keeps with every change of a run, so
    /// it costs the same at a million runs as at ten.
    async fn run_counts(&self, scope: &Scope) -> StoreResult<Vec<RunCount>>;

    /// How many runs of each workflow of each namespace in `scope` ever started, and ever
    /// reached each final status; kept like [`RunReads::run_counts`], and never lowered.
    async fn run_totals(&self, scope: &Scope) -> StoreResult<Vec<RunTotals>>;

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

    /// The activity minutes of `scope` (one tenant, or every tenant together) from
    /// `since_minute` on, oldest first; quiet minutes are left out. Runs started and finished
    /// are kept by the store with every change (PostgreSQL's are at most a fold behind); step
    /// run times are what the engines have added ([`Upkeep::add_step_tallies`]).
    ///
    /// [`Upkeep::add_step_tallies`]: crate::store::Upkeep::add_step_tallies
    async fn activity(&self, scope: &Scope, since_minute: i64) -> StoreResult<Vec<ActivityMinute>>;
}
