//! The SQLite store: the embedded default.
//!
//! Every write goes through one thread that owns the write connection and group-commits
//! whatever is queued ([`writer`]), so the process never contends with itself for SQLite's write
//! lock and a burst of small writes shares one transaction. Reads run on a few reader threads
//! ([`readers`]); WAL mode lets them read while the writer commits. Both call SQLite in-thread
//! (rusqlite): one hand-off per operation, not one per statement. Migrations are sqlx's, shared
//! with `durable migrate`.
//!
//! What both stores compute alike (a turn's commit, a result, settling a parent, a list's
//! filters) is `crate::store::rules`'s; the files here hold SQLite's statements and I/O. Each
//! method of the capability traits below runs the function of the same name in the file of its
//! role, as the PostgreSQL store's do: a write on the writer thread, a read on a reader.
//!
//! Its files, by role (the PostgreSQL store has a file of the same name for each):
//! - `writer.rs`: the group commit every write goes through (and `readers.rs`, the reads);
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
//! - `sql.rs`: building statements (`?` placeholders).

mod accounts;
mod activity;
mod events;
mod lifecycle;
mod plans;
mod readers;
mod reads;
mod result;
mod retention;
mod rows;
mod schedules;
mod settle;
mod sql;
mod tokens;
mod turn;
mod writer;

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use rusqlite::{Connection, OpenFlags};
use serde_json::Value;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqliteSynchronous};
use sqlx::{Connection as _, SqliteConnection};

use self::readers::Readers;
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

/// How many reader threads (and read connections) a store keeps.
const READERS: usize = 3;

/// How long a connection waits for another process's write lock (the CLI, a second server).
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// The SQLite [`Store`] and [`super::Accounts`].
#[derive(Clone, Debug)]
pub struct SqliteStore {
    writer: Writer,
    readers: Readers,
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `url` (`sqlite://path/to/file.db`) and applies
    /// the migrations.
    pub async fn connect(url: &str) -> StoreResult<Self> {
        let options = SqliteConnectOptions::from_str(url)
            .map_err(|_| StoreError::UnsupportedUrl(url.to_owned()))?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(BUSY_TIMEOUT)
            .foreign_keys(true);
        let path = options.get_filename().to_path_buf();
        if let Some(dir) = path.parent()
            && !dir.as_os_str().is_empty()
        {
            std::fs::create_dir_all(dir).map_err(|e| StoreError::Unavailable(Box::new(e)))?;
        }
        let mut migrator = SqliteConnection::connect_with(&options)
            .await
            .map_err(|e| StoreError::Unavailable(Box::new(e)))?;
        sqlx::migrate!("../migrations/sqlite")
            .run(&mut migrator)
            .await
            .map_err(|e| StoreError::Migrate(Box::new(e)))?;
        migrator
            .close()
            .await
            .map_err(|e| StoreError::Unavailable(Box::new(e)))?;
        let writer = Writer::start(open(&path, false)?)?;
        let readers = Readers::start(
            (0..READERS)
                .map(|_| open(&path, true))
                .collect::<StoreResult<Vec<_>>>()?,
        )?;
        Ok(SqliteStore { writer, readers })
    }

    /// Runs raw SQL on the write connection; for tests that plant legacy rows.
    #[cfg(any(test, feature = "test-util"))]
    pub async fn execute_raw(&self, sql: &str) -> StoreResult<u64> {
        let sql = sql.to_owned();
        self.writer
            .write(move |conn| {
                let changed = conn.execute(&sql, []).map_err(sql::db)?;
                Ok(writer::Wrote::Keep(changed as u64))
            })
            .await
    }
}

/// Opens a connection to the migrated database at `path`.
fn open(path: &Path, read_only: bool) -> StoreResult<Connection> {
    let flags = if read_only {
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX
    } else {
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX
    };
    let fail = |e: rusqlite::Error| {
        let path: PathBuf = path.to_path_buf();
        StoreError::Unavailable(format!("opening {}: {e}", path.display()).into())
    };
    let conn = Connection::open_with_flags(path, flags).map_err(fail)?;
    conn.busy_timeout(BUSY_TIMEOUT).map_err(fail)?;
    conn.execute_batch("PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;")
        .map_err(fail)?;
    conn.set_prepared_statement_cache_capacity(64);
    Ok(conn)
}

#[async_trait]
impl Turns for SqliteStore {
    async fn create_run(
        &self,
        run: NewRun,
        now: Millis,
        claim: Option<&Claim>,
    ) -> StoreResult<Run> {
        let lease = rules::turn::start_lease(&run, claim);
        self.writer
            .write(move |conn| {
                let lease = lease
                    .as_ref()
                    .map(|(owner, until)| (owner.as_str(), *until));
                turn::create_run(conn, &run, now, lease)
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
            .write(move |conn| turn::commit_turn(conn, &lease, &id, Some(attempt), &commit, now))
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
            .write(move |conn| turn::create_run_and_commit(conn, &run, &lease, &commit, now))
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
            .write(move |conn| result::apply_step_result(conn, &result, now, claim.as_ref()))
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
                result::apply_result_and_commit(conn, &result, &lease, attempt, &commit, now)
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
            .write(move |conn| turn::record_local_step(conn, &scope, &id, &checkpoint))
            .await
    }

    async fn buffered_signals(&self, id: &RunId) -> StoreResult<Vec<BufferedSignal>> {
        let id = id.clone();
        self.readers
            .read(move |conn| reads::buffered_signals(conn, &id))
            .await
    }
}

#[async_trait]
impl RunReads for SqliteStore {
    async fn get_run(&self, scope: &Scope, id: &RunId) -> StoreResult<Option<Run>> {
        let (scope, id) = (scope.clone(), id.clone());
        self.readers
            .read(move |conn| reads::get_run(conn, &scope, &id))
            .await
    }

    async fn list_runs(&self, scope: &Scope, query: &RunQuery) -> StoreResult<RunPage> {
        let (scope, query) = (scope.clone(), query.clone());
        self.readers
            .read(move |conn| reads::list_runs(conn, &scope, &query))
            .await
    }

    async fn count_by_status(&self, scope: &Scope) -> StoreResult<Vec<StatusCount>> {
        let scope = scope.clone();
        self.readers
            .read(move |conn| reads::count_by_status(conn, &scope))
            .await
    }

    async fn run_counts(&self, scope: &Scope) -> StoreResult<Vec<RunCount>> {
        let scope = scope.clone();
        self.readers
            .read(move |conn| reads::run_counts(conn, &scope))
            .await
    }

    async fn run_totals(&self, scope: &Scope) -> StoreResult<Vec<RunTotals>> {
        let scope = scope.clone();
        self.readers
            .read(move |conn| reads::run_totals(conn, &scope))
            .await
    }

    async fn namespace_loads(
        &self,
        scope: &Scope,
        failed_since: Millis,
    ) -> StoreResult<Vec<NamespaceLoad>> {
        let scope = scope.clone();
        self.readers
            .read(move |conn| reads::namespace_loads(conn, &scope, failed_since))
            .await
    }

    async fn facets(&self, scope: &Scope) -> StoreResult<Facets> {
        let scope = scope.clone();
        self.readers
            .read(move |conn| reads::facets(conn, &scope))
            .await
    }

    async fn value_facets(&self, scope: &Scope, key: &str) -> StoreResult<Vec<ValueCount>> {
        let (scope, key) = (scope.clone(), key.to_owned());
        self.readers
            .read(move |conn| reads::value_facets(conn, &scope, &key))
            .await
    }

    async fn checkpoints(&self, scope: &Scope, id: &RunId) -> StoreResult<Vec<Checkpoint>> {
        let (scope, id) = (scope.clone(), id.clone());
        self.readers
            .read(move |conn| reads::checkpoints(conn, &scope, &id))
            .await
    }

    async fn activity(&self, scope: &Scope, since_minute: i64) -> StoreResult<Vec<ActivityMinute>> {
        let scope = scope.clone();
        self.readers
            .read(move |conn| activity::activity(conn, &scope, since_minute))
            .await
    }
}

#[async_trait]
impl Leases for SqliteStore {
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
        self.writer
            .write(move |conn| lifecycle::claim_runs(conn, &req))
            .await
    }

    async fn runnable_runs(
        &self,
        scope: &Scope,
        now: Millis,
        per_tenant: u32,
        limit: u32,
        max_recoveries: u32,
    ) -> StoreResult<Vec<Runnable>> {
        let scope = scope.clone();
        self.readers
            .read(move |conn| {
                lifecycle::runnable_runs(conn, &scope, now, per_tenant, limit, max_recoveries)
            })
            .await
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
        self.writer
            .write(move |conn| lifecycle::claim_runs(conn, &req))
            .await
    }

    async fn renew_leases(&self, owner: &str, ids: &[RunId], until: Millis) -> StoreResult<u64> {
        if ids.is_empty() {
            return Ok(0);
        }
        let (owner, ids) = (owner.to_owned(), ids.to_vec());
        self.writer
            .write(move |conn| lifecycle::renew_leases(conn, &owner, &ids, until))
            .await
    }

    async fn beat_driver(&self, owner: &str, alive_until: Millis, now: Millis) -> StoreResult<u32> {
        let owner = owner.to_owned();
        self.writer
            .write(move |conn| lifecycle::beat_driver(conn, &owner, alive_until, now))
            .await
    }

    async fn next_wake_at(&self, scope: &Scope) -> StoreResult<Option<Millis>> {
        let scope = scope.clone();
        self.readers
            .read(move |conn| reads::next_wake_at(conn, &scope))
            .await
    }

    async fn release_leases(&self, owner: &str, now: Millis) -> StoreResult<u64> {
        let owner = owner.to_owned();
        self.writer
            .write(move |conn| lifecycle::release_leases(conn, &owner, now))
            .await
    }
}

#[async_trait]
impl Retention for SqliteStore {
    async fn prune_runs(
        &self,
        tenant: &Namespace,
        finished_before: Millis,
        families: u32,
    ) -> StoreResult<u64> {
        let tenant = tenant.clone();
        self.writer
            .write(move |conn| retention::prune_runs(conn, &tenant, finished_before, families))
            .await
    }

    async fn prunable_runs(&self, tenant: &Namespace, finished_before: Millis) -> StoreResult<u64> {
        let tenant = tenant.clone();
        self.readers
            .read(move |conn| retention::prunable_runs(conn, &tenant, finished_before))
            .await
    }
}

#[async_trait]
impl Upkeep for SqliteStore {
    async fn sweep_abandoned(
        &self,
        scope: &Scope,
        max_recoveries: u32,
        now: Millis,
    ) -> StoreResult<Vec<Run>> {
        let scope = scope.clone();
        self.writer
            .write(move |conn| lifecycle::sweep_abandoned(conn, &scope, max_recoveries, now))
            .await
    }

    async fn wake_blocked(&self, scope: &Scope, now: Millis) -> StoreResult<Vec<Run>> {
        let scope = scope.clone();
        self.writer
            .write(move |conn| lifecycle::wake_blocked(conn, &scope, now))
            .await
    }

    async fn unblock_runs(
        &self,
        scope: &Scope,
        served: &[(String, u32)],
        now: Millis,
    ) -> StoreResult<Vec<Run>> {
        let (scope, served) = (scope.clone(), served.to_vec());
        self.writer
            .write(move |conn| lifecycle::unblock_runs(conn, &scope, &served, now))
            .await
    }

    async fn fold_counts(&self) -> StoreResult<()> {
        // The triggers update the totals in place: nothing waits to be folded.
        Ok(())
    }

    async fn add_step_tallies(&self, tallies: &[StepTally]) -> StoreResult<()> {
        let tallies = tallies.to_vec();
        self.writer
            .write(move |conn| activity::add_step_tallies(conn, &tallies))
            .await
    }

    async fn prune_activity(&self, before_minute: i64) -> StoreResult<u64> {
        self.writer
            .write(move |conn| activity::prune_activity(conn, before_minute))
            .await
    }
}

#[async_trait]
impl Dispatches for SqliteStore {
    async fn pending_remote_steps(
        &self,
        scope: &Scope,
        lost: &LostDispatch,
        limit: u32,
    ) -> StoreResult<Vec<PendingStep>> {
        let (scope, lost) = (scope.clone(), lost.clone());
        self.readers
            .read(move |conn| reads::pending_remote_steps(conn, &scope, &lost, limit))
            .await
    }

    async fn slots_out(&self, scope: &Scope, limit: u32) -> StoreResult<Vec<SlotOut>> {
        let scope = scope.clone();
        self.readers
            .read(move |conn| reads::slots_out(conn, &scope, limit))
            .await
    }

    async fn beat_step(
        &self,
        scope: &Scope,
        id: &RunId,
        seq: u32,
        group: &str,
        now: Millis,
    ) -> StoreResult<bool> {
        let (scope, id, group) = (scope.clone(), id.clone(), group.to_owned());
        self.writer
            .write(move |conn| lifecycle::beat_step(conn, &scope, &id, seq, &group, now))
            .await
    }

    async fn mark_dispatched(
        &self,
        id: &RunId,
        seq: u32,
        by: &str,
        now: Millis,
    ) -> StoreResult<()> {
        let (id, by) = (id.clone(), by.to_owned());
        self.writer
            .write(move |conn| lifecycle::mark_dispatched(conn, &id, seq, &by, now))
            .await
    }
}

#[async_trait]
impl RunControl for SqliteStore {
    async fn update_run_if(
        &self,
        scope: &Scope,
        id: &RunId,
        expected: &[RunStatus],
        patch: RunPatch,
        now: Millis,
    ) -> StoreResult<Option<Run>> {
        let (scope, id, expected) = (scope.clone(), id.clone(), expected.to_vec());
        self.writer
            .write(move |conn| lifecycle::update_run_if(conn, &scope, &id, &expected, &patch, now))
            .await
    }

    async fn retry_run(&self, scope: &Scope, id: &RunId, now: Millis) -> StoreResult<Option<Run>> {
        let (scope, id) = (scope.clone(), id.clone());
        self.writer
            .write(move |conn| lifecycle::retry_run(conn, &scope, &id, now))
            .await
    }

    async fn send_signal(
        &self,
        scope: &Scope,
        id: &RunId,
        name: &str,
        payload: &Value,
        now: Millis,
    ) -> StoreResult<SignalSent> {
        let (scope, id, name, payload) =
            (scope.clone(), id.clone(), name.to_owned(), payload.clone());
        self.writer
            .write(move |conn| lifecycle::send_signal(conn, &scope, &id, &name, &payload, now))
            .await
    }

    async fn send_update(
        &self,
        scope: &Scope,
        id: &RunId,
        update: &AcceptedUpdate,
        now: Millis,
    ) -> StoreResult<UpdateSent> {
        let (scope, id, update) = (scope.clone(), id.clone(), update.clone());
        self.writer
            .write(move |conn| lifecycle::send_update(conn, &scope, &id, &update, now))
            .await
    }

    async fn stored_update(
        &self,
        scope: &Scope,
        id: &RunId,
        update_id: &UpdateId,
    ) -> StoreResult<Option<StoredUpdate>> {
        let (scope, id, update_id) = (scope.clone(), id.clone(), update_id.clone());
        self.readers
            .read(move |conn| lifecycle::scoped_update(conn, &scope, &id, &update_id))
            .await
    }
}
