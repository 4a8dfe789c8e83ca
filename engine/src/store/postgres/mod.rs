//! The PostgreSQL store: several control planes share one database.
//!
//! Semantically identical to the SQLite store (the same conformance suite runs on both): the
//! same namespace rules, compare-and-set transitions, leases and scoped reads. Each operation is
//! one transaction on a pooled connection; runs are claimed with `FOR UPDATE SKIP LOCKED`, so
//! control planes on one database drive disjoint sets of runs. The writes every run makes
//! (starts, turns, step results) are committed in groups ([`writer`]); reads and the other
//! writes use the pool directly.
//!
//! What both stores compute alike (a turn's commit, a result, settling a parent, a list's
//! filters) is `crate::store::rules`'s; the files here hold PostgreSQL's statements and I/O.
//! Each method of the capability traits below runs the function of the same name in the file of
//! its role, as the SQLite store's do: a start, turn or step result through the group commit
//! (merged with others' by `merged/` when it can be), another write in a transaction of its own
//! (`in_tx!`), a read on the pool.
//!
//! Its files, by role (the SQLite store has a file of the same name for each):
//! - `writer/`: the group commit of starts, turns and step results;
//! - `turn.rs`: a turn's commit: its checkpoints, resolved waits, children, cancellations and
//!   the run's next status;
//! - `result.rs`: a step result, alone or with the turn it leads to;
//! - `settle.rs`: resolving waits: step retries, pending checkpoints, a parent's wait;
//! - `lifecycle.rs`: claims, leases, sweeps, dispatch beats, control verbs and signals;
//! - `reads.rs`: scoped reads;
//! - `retention.rs`: deleting expired run families;
//! - `activity.rs`: the activity minutes the charts read;
//! - `accounts.rs`: dashboard users and settings;
//! - `rows.rs`: row mapping and the statements several operations share;
//! - `sql.rs`: building statements (`$n` placeholders).
//!
//! And only here: `fused.rs` (a turn's own write in one statement), `merged/` (many runs' writes
//! in one statement), `values.rs` (what a new run's and checkpoint's columns hold, bound for one
//! row or as arrays), `testing.rs`.

mod accounts;
mod activity;
mod events;
mod fused;
mod lifecycle;
mod merged;
mod plans;
mod reads;
mod result;
mod retention;
mod rows;
mod schedules;
mod settle;
mod sql;
#[cfg(any(test, feature = "test-util"))]
pub mod testing;
mod tokens;
mod turn;
mod values;
mod writer;

use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;

use self::rows::db;
use self::writer::Writer;
use super::rules;
use super::rules::lifecycle::ClaimRequest;
use super::{
    Claim, Committed, Dispatches, Leases, LostDispatch, NewCheckpoint, NewRun, PendingStep,
    Retention, RunControl, RunPatch, RunReads, Runnable, SignalSent, SlotOut, StepApplied,
    StoreError, StoreResult, TurnCommit, Turns, UpdateSent, Upkeep,
};
use crate::model::{
    AcceptedUpdate, ActivityMinute, BufferedSignal, Checkpoint, Facets, Millis, Namespace,
    NamespaceLoad, Run, RunCount, RunId, RunPage, RunQuery, RunStatus, RunTotals, Scope,
    StatusCount, StepResult, StepTally, StoredUpdate, UpdateId, ValueCount,
};

/// The PostgreSQL [`Store`] and [`super::Accounts`].
#[derive(Clone, Debug)]
pub struct PgStore {
    pool: PgPool,
    /// Starts, turns and step results: the writes every run makes, committed in groups.
    writer: Writer,
}

/// Runs `$body` (an async block using `$conn: &mut PgConnection`) in a transaction, committing
/// when it yields `Some`/a value and rolling back when an `Option` body yields `None`.
macro_rules! in_tx {
    ($pool:expr, |$conn:ident| $body:expr) => {{
        let mut tx = $pool.begin().await.map_err(db)?;
        let out = {
            let $conn: &mut sqlx::PgConnection = &mut tx;
            $body.await?
        };
        tx.commit().await.map_err(db)?;
        Ok(out)
    }};
    (optional $pool:expr, |$conn:ident| $body:expr) => {{
        let mut tx = $pool.begin().await.map_err(db)?;
        let out = {
            let $conn: &mut sqlx::PgConnection = &mut tx;
            $body.await?
        };
        match out {
            Some(out) => {
                tx.commit().await.map_err(db)?;
                Ok(Some(out))
            }
            None => {
                tx.rollback().await.map_err(db)?;
                Ok(None)
            }
        }
    }};
}

impl PgStore {
    /// Connects to `url` (`postgres://…`) and applies the migrations.
    pub async fn connect(url: &str) -> StoreResult<Self> {
        let pool = PgPoolOptions::new()
            // Reads, the cold writes, and one connection per group-commit lane (and the
            // express lane).
            .max_connections(16 + writer::LANES as u32 + 1)
            .acquire_timeout(Duration::from_secs(10))
            .connect(url)
            .await
            .map_err(|e| StoreError::Unavailable(Box::new(e)))?;
        sqlx::migrate!("../migrations/postgres")
            .run(&pool)
            .await
            .map_err(|e| StoreError::Migrate(Box::new(e)))?;
        let writer = Writer::start(&pool);
        Ok(PgStore { pool, writer })
    }

    /// Runs raw SQL; for tests that plant legacy rows.
    #[cfg(any(test, feature = "test-util"))]
    pub async fn execute_raw(&self, sql: &str) -> StoreResult<u64> {
        Ok(sqlx::raw_sql(sql)
            .execute(&self.pool)
            .await
            .map_err(db)?
            .rows_affected())
    }
}

#[async_trait]
impl Turns for PgStore {
    async fn create_run(
        &self,
        run: NewRun,
        now: Millis,
        claim: Option<&Claim>,
    ) -> StoreResult<Run> {
        let lease = rules::turn::start_lease(&run, claim);
        let id = run.id.clone();
        self.writer
            .write_as(true, (run, lease, now), |conn, (run, lease, now)| {
                let lease = lease
                    .as_ref()
                    .map(|(owner, until)| (owner.as_str(), *until));
                Box::pin(turn::create_run(conn, run, *now, lease))
            })
            .await?
            .ok_or_else(|| rules::turn::id_taken(&id))
    }

    async fn commit_turn(
        &self,
        lease: &Claim,
        id: &RunId,
        attempt: u32,
        commit: TurnCommit,
        now: Millis,
    ) -> StoreResult<Option<Committed>> {
        let one_statement = turn::is_one_statement(id, &commit);
        let args = (lease.clone(), id.clone(), attempt, commit, now);
        self.writer
            .write_as(
                one_statement,
                args,
                |conn, (lease, id, attempt, commit, now)| {
                    Box::pin(turn::commit_turn(conn, lease, id, *attempt, commit, *now))
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
        let one_statement = turn::is_one_statement(&id, &commit);
        let args = (run, lease.clone(), commit, now);
        let created = self
            .writer
            .write_merged(
                one_statement,
                merged::create_runs_and_commit,
                merged::id_of,
                args,
                merged::create_run_and_commit,
            )
            .await?;
        match created {
            Some(Some(committed)) => Ok(Some(committed)),
            Some(None) => Err(rules::turn::id_taken(&id)),
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
                Box::pin(result::apply_step_result(
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
        let one_statement = turn::is_one_statement(&result.run_id, &commit);
        let args = (result.clone(), lease.clone(), attempt, commit, now);
        self.writer
            .write_merged(
                one_statement,
                merged::apply_results_and_commit,
                merged::run_of,
                args,
                merged::apply_result_and_commit,
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
                Box::pin(turn::record_local_step(conn, scope, id, checkpoint))
            })
            .await?;
        Ok(written.is_some())
    }

    async fn buffered_signals(&self, id: &RunId) -> StoreResult<Vec<BufferedSignal>> {
        reads::buffered_signals(&self.pool, id).await
    }
}

#[async_trait]
impl RunReads for PgStore {
    async fn get_run(&self, scope: &Scope, id: &RunId) -> StoreResult<Option<Run>> {
        reads::get_run(&self.pool, scope, id).await
    }

    async fn list_runs(&self, scope: &Scope, query: &RunQuery) -> StoreResult<RunPage> {
        reads::list_runs(&self.pool, scope, query).await
    }

    async fn count_by_status(&self, scope: &Scope) -> StoreResult<Vec<StatusCount>> {
        reads::count_by_status(&self.pool, scope).await
    }

    async fn run_counts(&self, scope: &Scope) -> StoreResult<Vec<RunCount>> {
        reads::run_counts(&self.pool, scope).await
    }

    async fn run_totals(&self, scope: &Scope) -> StoreResult<Vec<RunTotals>> {
        reads::run_totals(&self.pool, scope).await
    }

    async fn namespace_loads(
        &self,
        scope: &Scope,
        failed_since: Millis,
    ) -> StoreResult<Vec<NamespaceLoad>> {
        reads::namespace_loads(&self.pool, scope, failed_since).await
    }

    async fn facets(&self, scope: &Scope) -> StoreResult<Facets> {
        reads::facets(&self.pool, scope).await
    }

    async fn value_facets(&self, scope: &Scope, key: &str) -> StoreResult<Vec<ValueCount>> {
        reads::value_facets(&self.pool, scope, key).await
    }

    async fn checkpoints(&self, scope: &Scope, id: &RunId) -> StoreResult<Vec<Checkpoint>> {
        reads::checkpoints(&self.pool, scope, id).await
    }

    async fn activity(&self, scope: &Scope, since_minute: i64) -> StoreResult<Vec<ActivityMinute>> {
        activity::activity(&self.pool, scope, since_minute).await
    }
}

#[async_trait]
impl Leases for PgStore {
    async fn claim_runs(
        &self,
        scope: &Scope,
        owner: &str,
        now: Millis,
        lease_ms: i64,
        limit: u32,
        max_recoveries: u32,
    ) -> StoreResult<Vec<Run>> {
        let req = ClaimRequest::new(scope, owner, now, lease_ms, limit, max_recoveries);
        in_tx!(self.pool, |conn| lifecycle::claim_runs(conn, &req))
    }

    async fn runnable_runs(
        &self,
        scope: &Scope,
        now: Millis,
        per_tenant: u32,
        limit: u32,
        max_recoveries: u32,
    ) -> StoreResult<Vec<Runnable>> {
        lifecycle::runnable_runs(&self.pool, scope, now, per_tenant, limit, max_recoveries).await
    }

    async fn claim_these(
        &self,
        scope: &Scope,
        ids: &[RunId],
        owner: &str,
        now: Millis,
        lease_ms: i64,
        max_recoveries: u32,
    ) -> StoreResult<Vec<Run>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let req = ClaimRequest::these(scope, ids, owner, now, lease_ms, max_recoveries);
        in_tx!(self.pool, |conn| lifecycle::claim_runs(conn, &req))
    }

    async fn renew_leases(&self, owner: &str, ids: &[RunId], until: Millis) -> StoreResult<u64> {
        if ids.is_empty() {
            return Ok(0);
        }
        lifecycle::renew_leases(&self.pool, owner, ids, until).await
    }

    async fn beat_driver(&self, owner: &str, alive_until: Millis, now: Millis) -> StoreResult<u32> {
        lifecycle::beat_driver(&self.pool, owner, alive_until, now).await
    }

    async fn next_wake_at(&self, scope: &Scope) -> StoreResult<Option<Millis>> {
        reads::next_wake_at(&self.pool, scope).await
    }

    async fn release_leases(&self, owner: &str, now: Millis) -> StoreResult<u64> {
        lifecycle::release_leases(&self.pool, owner, now).await
    }
}

#[async_trait]
impl Retention for PgStore {
    async fn prune_runs(
        &self,
        tenant: &Namespace,
        finished_before: Millis,
        families: u32,
    ) -> StoreResult<u64> {
        retention::prune_runs(&self.pool, tenant, finished_before, families).await
    }

    async fn prunable_runs(&self, tenant: &Namespace, finished_before: Millis) -> StoreResult<u64> {
        retention::prunable_runs(&self.pool, tenant, finished_before).await
    }
}

#[async_trait]
impl Upkeep for PgStore {
    async fn sweep_abandoned(
        &self,
        scope: &Scope,
        max_recoveries: u32,
        now: Millis,
    ) -> StoreResult<Vec<Run>> {
        in_tx!(self.pool, |conn| lifecycle::sweep_abandoned(
            conn,
            scope,
            max_recoveries,
            now
        ))
    }

    async fn wake_blocked(&self, scope: &Scope, now: Millis) -> StoreResult<Vec<Run>> {
        in_tx!(self.pool, |conn| lifecycle::wake_blocked(conn, scope, now))
    }

    async fn unblock_runs(
        &self,
        scope: &Scope,
        served: &[(String, u32)],
        now: Millis,
    ) -> StoreResult<Vec<Run>> {
        in_tx!(self.pool, |conn| lifecycle::unblock_runs(
            conn, scope, served, now
        ))
    }

    async fn fold_counts(&self) -> StoreResult<()> {
        reads::fold_counts(&self.pool).await
    }

    async fn add_step_tallies(&self, tallies: &[StepTally]) -> StoreResult<()> {
        activity::add_step_tallies(&self.pool, tallies).await
    }

    async fn prune_activity(&self, before_minute: i64) -> StoreResult<u64> {
        activity::prune_activity(&self.pool, before_minute).await
    }
}

#[async_trait]
impl Dispatches for PgStore {
    async fn pending_remote_steps(
        &self,
        scope: &Scope,
        lost: &LostDispatch,
        limit: u32,
    ) -> StoreResult<Vec<PendingStep>> {
        reads::pending_remote_steps(&self.pool, scope, lost, limit).await
    }

    async fn slots_out(&self, scope: &Scope, limit: u32) -> StoreResult<Vec<SlotOut>> {
        reads::slots_out(&self.pool, scope, limit).await
    }

    async fn beat_step(
        &self,
        scope: &Scope,
        id: &RunId,
        seq: u32,
        group: &str,
        now: Millis,
    ) -> StoreResult<bool> {
        lifecycle::beat_step(&self.pool, scope, id, seq, group, now).await
    }

    async fn mark_dispatched(
        &self,
        id: &RunId,
        seq: u32,
        by: &str,
        now: Millis,
    ) -> StoreResult<()> {
        lifecycle::mark_dispatched(&self.pool, id, seq, by, now).await
    }
}

#[async_trait]
impl RunControl for PgStore {
    async fn update_run_if(
        &self,
        scope: &Scope,
        id: &RunId,
        expected: &[RunStatus],
        patch: RunPatch,
        now: Millis,
    ) -> StoreResult<Option<Run>> {
        in_tx!(optional self.pool, |conn| lifecycle::update_run_if(
            conn, scope, id, expected, &patch, now
        ))
    }

    async fn retry_run(&self, scope: &Scope, id: &RunId, now: Millis) -> StoreResult<Option<Run>> {
        in_tx!(optional self.pool, |conn| lifecycle::retry_run(conn, scope, id, now))
    }

    async fn send_signal(
        &self,
        scope: &Scope,
        id: &RunId,
        name: &str,
        payload: &Value,
        now: Millis,
    ) -> StoreResult<SignalSent> {
        in_tx!(self.pool, |conn| lifecycle::send_signal(
            conn, scope, id, name, payload, now
        ))
    }

    async fn send_update(
        &self,
        scope: &Scope,
        id: &RunId,
        update: &AcceptedUpdate,
        now: Millis,
    ) -> StoreResult<UpdateSent> {
        in_tx!(self.pool, |conn| lifecycle::send_update(
            conn, scope, id, update, now
        ))
    }

    async fn stored_update(
        &self,
        scope: &Scope,
        id: &RunId,
        update_id: &UpdateId,
    ) -> StoreResult<Option<StoredUpdate>> {
        lifecycle::scoped_update(&self.pool, scope, id, update_id).await
    }
}
