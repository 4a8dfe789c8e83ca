//! The SQLite store: the embedded default.
//!
//! All writes go through one task that owns the write connection and group-commits them
//! ([`writer`]), so one process never contends with itself for SQLite's write lock and many
//! small writes share a transaction; reads use a small pool of their own. WAL mode lets readers
//! run while the writer commits.

mod accounts;
mod result;
mod rows;
mod settle;
mod turn;
mod writer;

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::{Connection, QueryBuilder, Row, Sqlite, SqliteConnection};

use self::result::apply_step_result;
use self::rows::{
    CHECKPOINT_COLS, RUN_COLS, checkpoint_from_row, db, from_json, insert_run, run_from_row,
    to_json,
};
use self::settle::{settle_parent, settles_parent};
use self::writer::{Writer, Wrote};
use super::{
    Claim, NewRun, PendingStep, RunPatch, SignalSent, StepApplied, Store, StoreError, StoreResult,
    TurnCommit,
};
use crate::model::{
    BufferedSignal, Checkpoint, Cursor, Millis, Namespace, Run, RunId, RunPage, RunQuery,
    RunStatus, Scope, StatusCount, StepFailure, StepResult,
};

/// The SQLite [`Store`] and [`Accounts`].
#[derive(Clone, Debug)]
pub struct SqliteStore {
    writer: Writer,
    reader: SqlitePool,
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
            .busy_timeout(Duration::from_secs(10))
            .foreign_keys(true);
        if let Some(dir) = Path::new(options.get_filename()).parent()
            && !dir.as_os_str().is_empty()
        {
            std::fs::create_dir_all(dir).map_err(|e| StoreError::Unavailable(Box::new(e)))?;
        }
        let mut conn = SqliteConnection::connect_with(&options).await.map_err(db)?;
        sqlx::migrate!("../migrations/sqlite")
            .run(&mut conn)
            .await
            .map_err(|e| StoreError::Migrate(Box::new(e)))?;
        let writer = Writer::start(conn);
        let reader = SqlitePoolOptions::new()
            .max_connections(4)
            .connect_with(options.read_only(true))
            .await
            .map_err(db)?;
        Ok(SqliteStore { writer, reader })
    }

    /// Runs raw SQL on the write connection; for tests that plant legacy rows.
    #[cfg(any(test, feature = "test-util"))]
    pub async fn execute_raw(&self, sql: &str) -> StoreResult<u64> {
        let sql = sql.to_owned();
        self.writer
            .write(move |conn| {
                Box::pin(async move {
                    let done = sqlx::query(&sql).execute(&mut *conn).await.map_err(db)?;
                    Ok(Wrote::Keep(done.rows_affected()))
                })
            })
            .await
    }
}

/// Appends ` AND <namespace matches scope>` for column `col`. `default` also matches legacy
/// NULL / `''` rows; [`Scope::All`] adds nothing (no restriction, never `IS NULL`).
pub(super) fn push_scope(qb: &mut QueryBuilder<'_, Sqlite>, col: &str, scope: &Scope) {
    match scope.namespace() {
        None => {}
        Some(ns) if ns.is_default() => {
            qb.push(format!(
                " AND ({col} = 'default' OR {col} IS NULL OR {col} = '')"
            ));
        }
        Some(ns) => {
            qb.push(format!(" AND {col} = "));
            qb.push_bind(ns.as_str().to_owned());
        }
    }
}

#[async_trait]
impl Store for SqliteStore {
    fn supports_scoping(&self) -> bool {
        true
    }

    async fn create_run(
        &self,
        run: NewRun,
        now: Millis,
        claim: Option<&Claim>,
    ) -> StoreResult<Run> {
        // Only a driver of the run's namespace may take it.
        let lease = claim
            .filter(|c| c.scope.admits(&run.namespace))
            .map(|c| (c.owner.clone(), c.until));
        self.writer
            .write(move |conn| {
                Box::pin(async move {
                    let lease = lease
                        .as_ref()
                        .map(|(owner, until)| (owner.as_str(), *until));
                    let row = insert_run(&mut *conn, &run, now, false, lease)
                        .await
                        .map_err(|e| match db(e) {
                            StoreError::Conflict(_) => {
                                StoreError::Conflict(format!("run `{}`", run.id))
                            }
                            other => other,
                        })?
                        .ok_or_else(|| StoreError::Conflict(format!("run `{}`", run.id)))?;
                    Ok(Wrote::Keep(run_from_row(&row)?))
                })
            })
            .await
    }

    async fn get_run(&self, scope: &Scope, id: &RunId) -> StoreResult<Option<Run>> {
        let mut qb = QueryBuilder::new(format!("SELECT {RUN_COLS} FROM runs WHERE id = "));
        qb.push_bind(id.as_str().to_owned());
        push_scope(&mut qb, "namespace", scope);
        let row = qb.build().fetch_optional(&self.reader).await.map_err(db)?;
        row.as_ref().map(run_from_row).transpose()
    }

    async fn list_runs(&self, scope: &Scope, query: &RunQuery) -> StoreResult<RunPage> {
        let limit = query.page_size();
        let mut qb = QueryBuilder::new(format!("SELECT {RUN_COLS} FROM runs WHERE 1 = 1"));
        push_scope(&mut qb, "namespace", scope);
        if let Some(status) = query.status {
            qb.push(" AND status = ").push_bind(status.as_str());
        }
        if let Some(workflow) = &query.workflow {
            qb.push(" AND workflow = ").push_bind(workflow.clone());
        }
        if let Some(Cursor { created_at, id }) = &query.cursor {
            qb.push(" AND (created_at < ").push_bind(*created_at);
            qb.push(" OR (created_at = ").push_bind(*created_at);
            qb.push(" AND id < ").push_bind(id.as_str().to_owned());
            qb.push("))");
        }
        qb.push(" ORDER BY created_at DESC, id DESC LIMIT ")
            .push_bind(i64::from(limit) + 1);
        let rows = qb.build().fetch_all(&self.reader).await.map_err(db)?;
        let mut runs = rows
            .iter()
            .map(run_from_row)
            .collect::<StoreResult<Vec<_>>>()?;
        let next_cursor = if runs.len() > limit as usize {
            runs.truncate(limit as usize);
            runs.last().map(Cursor::after)
        } else {
            None
        };
        Ok(RunPage { runs, next_cursor })
    }

    async fn count_by_status(&self, scope: &Scope) -> StoreResult<Vec<StatusCount>> {
        let mut qb = QueryBuilder::new("SELECT status, COUNT(*) AS n FROM runs WHERE 1 = 1");
        push_scope(&mut qb, "namespace", scope);
        qb.push(" GROUP BY status");
        let rows = qb.build().fetch_all(&self.reader).await.map_err(db)?;
        let mut counts = Vec::with_capacity(rows.len());
        for row in rows {
            let status: String = row
                .try_get("status")
                .map_err(|e| StoreError::Corrupt(e.to_string()))?;
            let n: i64 = row
                .try_get("n")
                .map_err(|e| StoreError::Corrupt(e.to_string()))?;
            let status = status
                .parse::<RunStatus>()
                .map_err(|e| StoreError::Corrupt(e.to_string()))?;
            counts.push(StatusCount {
                status,
                count: n as u64,
            });
        }
        counts.sort_by_key(|c| RunStatus::ALL.iter().position(|s| *s == c.status));
        Ok(counts)
    }

    async fn checkpoints(&self, scope: &Scope, id: &RunId) -> StoreResult<Vec<Checkpoint>> {
        let mut qb = QueryBuilder::new(format!(
            "SELECT {CHECKPOINT_COLS} FROM checkpoints WHERE run_id = (SELECT id FROM runs WHERE id = "
        ));
        qb.push_bind(id.as_str().to_owned());
        push_scope(&mut qb, "namespace", scope);
        qb.push(") ORDER BY seq");
        let rows = qb.build().fetch_all(&self.reader).await.map_err(db)?;
        rows.iter().map(checkpoint_from_row).collect()
    }

    async fn claim_runs(
        &self,
        scope: &Scope,
        owner: &str,
        now: Millis,
        lease_ms: i64,
        limit: u32,
        max_recoveries: u32,
    ) -> StoreResult<Vec<Run>> {
        let (scope, owner) = (scope.clone(), owner.to_owned());
        self.writer
            .write(move |conn| {
                Box::pin(async move {
                    let (scope, owner) = (&scope, owner.as_str());
            let mut qb = QueryBuilder::new(
                "UPDATE runs SET recoveries = recoveries + (CASE WHEN status = 'running' THEN 1 ELSE 0 END), \
                 status = 'running', needs_wake = 0, wake_at = NULL, attempt = attempt + 1, locked_by = ",
            );
            qb.push_bind(owner.to_owned());
            qb.push(", locked_until = ").push_bind(now + lease_ms);
            qb.push(", updated_at = ").push_bind(now);
            qb.push(" WHERE id IN (SELECT id FROM runs WHERE (status = 'pending' OR (status = 'suspended' AND wake_at <= ");
            qb.push_bind(now);
            qb.push(") OR (status = 'running' AND locked_until < ")
                .push_bind(now);
            qb.push(" AND recoveries < ")
                .push_bind(i64::from(max_recoveries));
            qb.push("))");
            push_scope(&mut qb, "namespace", scope);
            qb.push(" ORDER BY COALESCE(wake_at, created_at) LIMIT ")
                .push_bind(i64::from(limit));
            qb.push(format!(") RETURNING {RUN_COLS}"));
            let rows = qb.build().fetch_all(&mut *conn).await.map_err(db)?;
            Ok(Wrote::Keep(rows.iter().map(run_from_row).collect::<StoreResult<Vec<_>>>()?))
                })
            })
            .await
    }
    async fn sweep_abandoned(
        &self,
        scope: &Scope,
        max_recoveries: u32,
        now: Millis,
    ) -> StoreResult<Vec<Run>> {
        let scope = scope.clone();
        self.writer
            .write(move |conn| {
                Box::pin(async move {
                    let scope = &scope;
            let dead = StepFailure::new(format!(
                "the run's driver stopped {max_recoveries} times while running it; it was given up as dead \
                 (retry it once the cause is fixed)"
            ))
            .with_code("dead");
            let mut qb = QueryBuilder::new("UPDATE runs SET status = 'dead', error = ");
            qb.push_bind(to_json(&dead));
            qb.push(", finished_at = ").push_bind(now);
            qb.push(", updated_at = ").push_bind(now);
            qb.push(
                ", locked_by = NULL, locked_until = NULL, wake_at = NULL \
                 WHERE status = 'running' AND locked_until < ",
            );
            qb.push_bind(now);
            qb.push(" AND recoveries >= ")
                .push_bind(i64::from(max_recoveries));
            push_scope(&mut qb, "namespace", scope);
            qb.push(format!(" RETURNING {RUN_COLS}"));
            let mut ended = qb.build().fetch_all(&mut *conn).await.map_err(db)?;
            let mut qb = QueryBuilder::new("UPDATE runs SET status = 'cancelled', finished_at = ");
            qb.push_bind(now);
            qb.push(", updated_at = ").push_bind(now);
            qb.push(
                ", locked_by = NULL, locked_until = NULL, wake_at = NULL \
                 WHERE status = 'cancelling' AND (locked_until IS NULL OR locked_until < ",
            );
            qb.push_bind(now);
            qb.push(")");
            push_scope(&mut qb, "namespace", scope);
            qb.push(format!(" RETURNING {RUN_COLS}"));
            ended.extend(qb.build().fetch_all(&mut *conn).await.map_err(db)?);
            let ended = ended
                .iter()
                .map(run_from_row)
                .collect::<StoreResult<Vec<_>>>()?;
            for run in &ended {
                if let Some(parent) = &run.parent_run_id {
                    settle_parent(conn, parent, run, now).await?;
                }
            }
            Ok(Wrote::Keep(ended))
                })
            })
            .await
    }
    async fn renew_leases(&self, owner: &str, ids: &[RunId], until: Millis) -> StoreResult<u64> {
        let (owner, ids) = (owner.to_owned(), ids.to_vec());
        self.writer
            .write(move |conn| {
                Box::pin(async move {
                    let (owner, ids) = (owner.as_str(), ids.as_slice());
                    if ids.is_empty() {
                        return Ok(Wrote::Discard(0));
                    }
                    let mut qb = QueryBuilder::new("UPDATE runs SET locked_until = ");
                    qb.push_bind(until);
                    qb.push(" WHERE status = 'running' AND locked_by = ")
                        .push_bind(owner.to_owned());
                    qb.push(" AND id IN (");
                    let mut sep = qb.separated(", ");
                    for id in ids {
                        sep.push_bind(id.as_str().to_owned());
                    }
                    qb.push(")");
                    Ok(Wrote::Keep(
                        qb.build()
                            .execute(&mut *conn)
                            .await
                            .map_err(db)?
                            .rows_affected(),
                    ))
                })
            })
            .await
    }
    async fn commit_turn(
        &self,
        lease: &Claim,
        id: &RunId,
        commit: TurnCommit,
        now: Millis,
    ) -> StoreResult<Option<Run>> {
        let (lease, id) = (lease.clone(), id.clone());
        self.writer
            .write(move |conn| Box::pin(turn::commit_turn(conn, lease, id, commit, now)))
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
            .write(move |conn| Box::pin(apply_step_result(conn, result, now, claim)))
            .await
    }

    async fn pending_remote_steps(
        &self,
        scope: &Scope,
        dispatched_before: Millis,
        limit: u32,
    ) -> StoreResult<Vec<PendingStep>> {
        let cols = CHECKPOINT_COLS
            .split(", ")
            .map(|c| format!("c.{c}"))
            .collect::<Vec<_>>()
            .join(", ");
        let mut qb = QueryBuilder::new(format!(
            "SELECT {cols}, r.namespace AS run_namespace FROM checkpoints c JOIN runs r ON r.id = c.run_id \
             WHERE c.kind = 'remote_step' AND c.status = 'pending' \
             AND r.status IN ('suspended', 'running') AND (c.enqueued_at <= "
        ));
        qb.push_bind(dispatched_before);
        // A retry waiting out its backoff is the turn's to send; this is only the safety net.
        qb.push(" OR (c.enqueued_at IS NULL AND (c.wake_at IS NULL OR c.wake_at <= ");
        qb.push_bind(dispatched_before);
        qb.push(")))");
        push_scope(&mut qb, "r.namespace", scope);
        qb.push(" ORDER BY c.enqueued_at LIMIT ")
            .push_bind(i64::from(limit));
        let rows = qb.build().fetch_all(&self.reader).await.map_err(db)?;
        rows.iter()
            .map(|row| {
                let ns: Option<String> = row
                    .try_get("run_namespace")
                    .map_err(|e| StoreError::Corrupt(e.to_string()))?;
                Ok(PendingStep {
                    namespace: Namespace::from_stored(ns.as_deref()),
                    checkpoint: checkpoint_from_row(row)?,
                })
            })
            .collect()
    }

    async fn mark_dispatched(&self, id: &RunId, seq: u32, now: Millis) -> StoreResult<()> {
        let id = id.clone();
        self.writer
            .write(move |conn| {
                Box::pin(async move {
                    let id = &id;
            sqlx::query("UPDATE checkpoints SET enqueued_at = ? WHERE run_id = ? AND seq = ? AND status = 'pending'")
                .bind(now)
                .bind(id.as_str())
                .bind(i64::from(seq))
                .execute(&mut *conn)
                .await
                .map_err(db)?;
            Ok(Wrote::Keep(()))
                })
            })
            .await
    }
    async fn next_wake_at(&self, scope: &Scope) -> StoreResult<Option<Millis>> {
        let mut qb = QueryBuilder::new(
            "SELECT MIN(CASE WHEN status = 'suspended' THEN wake_at ELSE locked_until END) AS due FROM runs \
             WHERE ((status = 'suspended' AND wake_at IS NOT NULL) OR status = 'running')",
        );
        push_scope(&mut qb, "namespace", scope);
        let row = qb.build().fetch_one(&self.reader).await.map_err(db)?;
        row.try_get("due")
            .map_err(|e| StoreError::Corrupt(e.to_string()))
    }

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
            .write(move |conn| {
                Box::pin(async move {
                    let (scope, id, expected) = (&scope, &id, expected.as_slice());
                    if expected.is_empty() {
                        return Ok(Wrote::Discard(None));
                    }
                    let finished_at = patch.status.is_terminal().then_some(now);
                    let mut qb = QueryBuilder::new("UPDATE runs SET status = ");
                    qb.push_bind(patch.status.as_str());
                    qb.push(", updated_at = ").push_bind(now);
                    qb.push(", finished_at = COALESCE(finished_at, ")
                        .push_bind(finished_at)
                        .push(")");
                    if let Some(error) = &patch.error {
                        qb.push(", error = ").push_bind(to_json(error));
                    }
                    if patch.status.is_terminal() {
                        qb.push(", locked_by = NULL, locked_until = NULL, wake_at = NULL");
                    }
                    qb.push(" WHERE id = ").push_bind(id.as_str().to_owned());
                    push_scope(&mut qb, "namespace", scope);
                    qb.push(" AND status IN (");
                    let mut sep = qb.separated(", ");
                    for st in expected {
                        sep.push_bind(st.as_str());
                    }
                    qb.push(format!(") RETURNING {RUN_COLS}"));
                    let Some(row) = qb.build().fetch_optional(&mut *conn).await.map_err(db)? else {
                        return Ok(Wrote::Discard(None));
                    };
                    let run = run_from_row(&row)?;
                    if let (Some(parent), true) = (&run.parent_run_id, settles_parent(run.status)) {
                        settle_parent(conn, parent, &run, now).await?;
                    }
                    Ok(Wrote::Keep(Some(run)))
                })
            })
            .await
    }
    async fn retry_run(&self, scope: &Scope, id: &RunId, now: Millis) -> StoreResult<Option<Run>> {
        let (scope, id) = (scope.clone(), id.clone());
        self.writer
            .write(move |conn| {
                Box::pin(async move {
                    let (scope, id) = (&scope, &id);
            let mut qb = QueryBuilder::new(
                "UPDATE runs SET status = 'pending', error = NULL, output = NULL, finished_at = NULL, \
                 wake_at = NULL, needs_wake = 0, recoveries = 0, locked_by = NULL, locked_until = NULL, updated_at = ",
            );
            qb.push_bind(now);
            qb.push(" WHERE id = ").push_bind(id.as_str().to_owned());
            push_scope(&mut qb, "namespace", scope);
            qb.push(format!(
                " AND status IN ('failed', 'dead') RETURNING {RUN_COLS}"
            ));
            let Some(row) = qb.build().fetch_optional(&mut *conn).await.map_err(db)? else {
                return Ok(Wrote::Discard(None));
            };
            sqlx::query(
                "DELETE FROM checkpoints WHERE run_id = ? AND seq >= \
                 (SELECT MIN(seq) FROM checkpoints WHERE run_id = ? AND status = 'failed')",
            )
            .bind(id.as_str())
            .bind(id.as_str())
            .execute(&mut *conn)
            .await
            .map_err(db)?;
            Ok(Wrote::Keep(Some(run_from_row(&row)?)))
                })
            })
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
            .write(move |conn| {
                Box::pin(async move {
                    let (scope, id, name, payload) = (&scope, &id, name.as_str(), &payload);
            let mut qb = QueryBuilder::new(format!("SELECT {RUN_COLS} FROM runs WHERE id = "));
            qb.push_bind(id.as_str().to_owned());
            push_scope(&mut qb, "namespace", scope);
            let Some(row) = qb.build().fetch_optional(&mut *conn).await.map_err(db)? else {
                return Ok(Wrote::Discard(SignalSent::NotFound));
            };
            let run = run_from_row(&row)?;
            if run.status.is_terminal() {
                return Ok(Wrote::Discard(SignalSent::RunFinished(run)));
            }
            sqlx::query("INSERT INTO signals (run_id, name, payload, created_at) VALUES (?, ?, ?, ?)")
                .bind(id.as_str())
                .bind(name)
                .bind(to_json(payload))
                .bind(now)
                .execute(&mut *conn)
                .await
                .map_err(db)?;
            let sql = format!(
                "UPDATE runs SET needs_wake = 1, updated_at = ?, \
                 wake_at = CASE WHEN status = 'suspended' THEN ? ELSE wake_at END \
                 WHERE id = ? RETURNING {RUN_COLS}"
            );
            let row = sqlx::query(&sql)
                .bind(now)
                .bind(now)
                .bind(id.as_str())
                .fetch_one(&mut *conn)
                .await
                .map_err(db)?;
            Ok(Wrote::Keep(SignalSent::Delivered(run_from_row(&row)?)))
                })
            })
            .await
    }
    async fn buffered_signals(&self, id: &RunId) -> StoreResult<Vec<BufferedSignal>> {
        let rows = sqlx::query(
            "SELECT id, name, payload FROM signals WHERE run_id = ? AND consumed_seq IS NULL ORDER BY id",
        )
        .bind(id.as_str())
        .fetch_all(&self.reader)
        .await
        .map_err(db)?;
        rows.iter()
            .map(|row| {
                let get = |e: sqlx::Error| StoreError::Corrupt(e.to_string());
                Ok(BufferedSignal {
                    id: row.try_get("id").map_err(get)?,
                    name: row.try_get("name").map_err(get)?,
                    payload: from_json(
                        &row.try_get::<String, _>("payload").map_err(get)?,
                        "signal payload",
                    )?,
                })
            })
            .collect()
    }

    async fn unblock_runs(
        &self,
        scope: &Scope,
        served: &[(String, u32)],
        now: Millis,
    ) -> StoreResult<Vec<Run>> {
        if served.is_empty() {
            return Ok(Vec::new());
        }
        let (scope, served) = (scope.clone(), served.to_vec());
        self.writer
            .write(move |conn| {
                Box::pin(async move {
                    let mut qb = QueryBuilder::new(
                        "UPDATE runs SET status = 'pending', error = NULL, updated_at = ",
                    );
                    qb.push_bind(now);
                    qb.push(" WHERE status = 'blocked'");
                    push_scope(&mut qb, "namespace", &scope);
                    qb.push(" AND (");
                    let mut sep = qb.separated(" OR ");
                    for (workflow, version) in &served {
                        sep.push("(workflow = ")
                            .push_bind_unseparated(workflow.clone())
                            .push_unseparated(" AND workflow_version = ")
                            .push_bind_unseparated(i64::from(*version))
                            .push_unseparated(")");
                    }
                    qb.push(format!(") RETURNING {RUN_COLS}"));
                    let rows = qb.build().fetch_all(&mut *conn).await.map_err(db)?;
                    let runs = rows
                        .iter()
                        .map(run_from_row)
                        .collect::<StoreResult<Vec<_>>>()?;
                    Ok(Wrote::Keep(runs))
                })
            })
            .await
    }

    async fn release_leases(&self, owner: &str, now: Millis) -> StoreResult<u64> {
        let owner = owner.to_owned();
        self.writer
            .write(move |conn| {
                Box::pin(async move {
                    let owner = owner.as_str();
            let done = sqlx::query(
                "UPDATE runs SET status = 'pending', locked_by = NULL, locked_until = NULL, updated_at = ? \
                 WHERE status = 'running' AND locked_by = ?",
            )
            .bind(now)
            .bind(owner)
            .execute(&mut *conn)
            .await
            .map_err(db)?;
            Ok(Wrote::Keep(done.rows_affected()))
                })
            })
            .await
    }
}
