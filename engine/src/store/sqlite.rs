//! The SQLite store: the embedded default.
//!
//! All writes go through a single-connection pool, so one process never contends with itself
//! for SQLite's write lock; reads use a small pool of their own. WAL mode lets readers run while
//! the writer commits.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteRow,
    SqliteSynchronous,
};
use sqlx::{QueryBuilder, Row, Sqlite};

use super::{
    Accounts, NewRun, NewUser, PendingStep, RunPatch, SignalSent, StepApplied, Store, StoreError,
    StoreResult, TurnCommit, TurnOutcome, User,
};
use crate::model::{
    BufferedSignal, Checkpoint, CheckpointKind, CheckpointStatus, Cursor, Millis, Namespace,
    RetryPolicy, Role, Run, RunId, RunPage, RunQuery, RunStatus, Scope, StatusCount, StepFailure,
    StepOutcome, StepResult,
};

const RUN_COLS: &str = "id, namespace, workflow, workflow_version, status, input, output, error, \
    tags, search_attributes, parent_run_id, root_run_id, nesting_depth, retry_of, continued_from, \
    attempt, wake_at, locked_by, locked_until, created_at, updated_at, finished_at";

const CHECKPOINT_COLS: &str = "run_id, seq, kind, name, status, attempts, worker_group, input, \
    output, error, wake_at, enqueued_at, started_at, finished_at, retry_policy";

/// The SQLite [`Store`] and [`Accounts`].
#[derive(Clone, Debug)]
pub struct SqliteStore {
    writer: SqlitePool,
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
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(options.clone())
            .await
            .map_err(db)?;
        sqlx::migrate!("../migrations/sqlite")
            .run(&writer)
            .await
            .map_err(|e| StoreError::Migrate(Box::new(e)))?;
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
        Ok(sqlx::query(sql)
            .execute(&self.writer)
            .await
            .map_err(db)?
            .rows_affected())
    }
}

fn db(e: sqlx::Error) -> StoreError {
    if let sqlx::Error::Database(d) = &e
        && d.is_unique_violation()
    {
        return StoreError::Conflict(d.message().to_owned());
    }
    StoreError::Unavailable(Box::new(e))
}

fn to_json<T: Serialize>(v: &T) -> String {
    // Serialising plain data (Values, strings, failures) to a String cannot fail.
    serde_json::to_string(v).unwrap_or_else(|_| "null".to_owned())
}

fn from_json<T: DeserializeOwned>(raw: &str, what: &str) -> StoreResult<T> {
    serde_json::from_str(raw).map_err(|e| StoreError::Corrupt(format!("{what}: {e}")))
}

fn opt_json<T: DeserializeOwned>(raw: Option<String>, what: &str) -> StoreResult<Option<T>> {
    raw.map(|r| from_json(&r, what)).transpose()
}

fn run_id(raw: String) -> StoreResult<RunId> {
    RunId::parse(&raw).map_err(|e| StoreError::Corrupt(e.to_string()))
}

fn opt_run_id(raw: Option<String>) -> StoreResult<Option<RunId>> {
    raw.map(run_id).transpose()
}

fn run_from_row(row: &SqliteRow) -> StoreResult<Run> {
    let get = |e: sqlx::Error| StoreError::Corrupt(e.to_string());
    let status: String = row.try_get("status").map_err(get)?;
    Ok(Run {
        id: run_id(row.try_get("id").map_err(get)?)?,
        namespace: Namespace::from_stored(
            row.try_get::<Option<String>, _>("namespace")
                .map_err(get)?
                .as_deref(),
        ),
        workflow: row.try_get("workflow").map_err(get)?,
        workflow_version: row.try_get::<i64, _>("workflow_version").map_err(get)? as u32,
        status: status
            .parse()
            .map_err(|e: crate::model::UnknownStatus| StoreError::Corrupt(e.to_string()))?,
        input: from_json(
            &row.try_get::<String, _>("input").map_err(get)?,
            "run input",
        )?,
        output: opt_json(row.try_get("output").map_err(get)?, "run output")?,
        error: opt_json(row.try_get("error").map_err(get)?, "run error")?,
        tags: from_json(&row.try_get::<String, _>("tags").map_err(get)?, "run tags")?,
        search_attributes: from_json(
            &row.try_get::<String, _>("search_attributes").map_err(get)?,
            "run search attributes",
        )?,
        parent_run_id: opt_run_id(row.try_get("parent_run_id").map_err(get)?)?,
        root_run_id: run_id(row.try_get("root_run_id").map_err(get)?)?,
        nesting_depth: row.try_get::<i64, _>("nesting_depth").map_err(get)? as u32,
        retry_of: opt_run_id(row.try_get("retry_of").map_err(get)?)?,
        continued_from: opt_run_id(row.try_get("continued_from").map_err(get)?)?,
        attempt: row.try_get::<i64, _>("attempt").map_err(get)? as u32,
        wake_at: row.try_get("wake_at").map_err(get)?,
        locked_by: row.try_get("locked_by").map_err(get)?,
        locked_until: row.try_get("locked_until").map_err(get)?,
        created_at: row.try_get("created_at").map_err(get)?,
        updated_at: row.try_get("updated_at").map_err(get)?,
        finished_at: row.try_get("finished_at").map_err(get)?,
    })
}

fn checkpoint_from_row(row: &SqliteRow) -> StoreResult<Checkpoint> {
    let get = |e: sqlx::Error| StoreError::Corrupt(e.to_string());
    let kind: String = row.try_get("kind").map_err(get)?;
    let status: String = row.try_get("status").map_err(get)?;
    Ok(Checkpoint {
        run_id: run_id(row.try_get("run_id").map_err(get)?)?,
        seq: row.try_get::<i64, _>("seq").map_err(get)? as u32,
        kind: CheckpointKind::parse(&kind)
            .ok_or_else(|| StoreError::Corrupt(format!("checkpoint kind `{kind}`")))?,
        name: row.try_get("name").map_err(get)?,
        status: CheckpointStatus::parse(&status)
            .ok_or_else(|| StoreError::Corrupt(format!("checkpoint status `{status}`")))?,
        attempts: row.try_get::<i64, _>("attempts").map_err(get)? as u32,
        worker_group: row.try_get("worker_group").map_err(get)?,
        input: opt_json(row.try_get("input").map_err(get)?, "checkpoint input")?,
        output: opt_json(row.try_get("output").map_err(get)?, "checkpoint output")?,
        error: opt_json(row.try_get("error").map_err(get)?, "checkpoint error")?,
        wake_at: row.try_get("wake_at").map_err(get)?,
        enqueued_at: row.try_get("enqueued_at").map_err(get)?,
        started_at: row.try_get("started_at").map_err(get)?,
        finished_at: row.try_get("finished_at").map_err(get)?,
        retry_policy: opt_json(
            row.try_get("retry_policy").map_err(get)?,
            "checkpoint retry policy",
        )?,
    })
}

/// Inserts a `pending` run; with `keep_existing`, an existing id is left alone (and `None`
/// returned) instead of failing.
async fn insert_run<'e, E>(
    executor: E,
    run: &NewRun,
    now: Millis,
    keep_existing: bool,
) -> Result<Option<SqliteRow>, sqlx::Error>
where
    E: sqlx::Executor<'e, Database = Sqlite>,
{
    let conflict = if keep_existing {
        " ON CONFLICT (id) DO NOTHING"
    } else {
        ""
    };
    let sql = format!(
        "INSERT INTO runs (id, namespace, workflow, workflow_version, status, input, tags, \
         search_attributes, parent_run_id, root_run_id, nesting_depth, retry_of, continued_from, \
         created_at, updated_at) VALUES (?, ?, ?, ?, 'pending', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?){conflict} \
         RETURNING {RUN_COLS}"
    );
    sqlx::query(&sql)
        .bind(run.id.as_str())
        .bind(run.namespace.as_str())
        .bind(&run.workflow)
        .bind(i64::from(run.workflow_version))
        .bind(to_json(&run.input))
        .bind(to_json(&run.tags))
        .bind(to_json(&run.search_attributes))
        .bind(run.parent_run_id.as_ref().map(RunId::as_str))
        .bind(run.root_run_id.as_str())
        .bind(i64::from(run.nesting_depth))
        .bind(run.retry_of.as_ref().map(RunId::as_str))
        .bind(run.continued_from.as_ref().map(RunId::as_str))
        .bind(now)
        .bind(now)
        .fetch_optional(executor)
        .await
}

/// Appends ` AND <namespace matches scope>` for column `col`. `default` also matches legacy
/// NULL / `''` rows; [`Scope::All`] adds nothing (no restriction, never `IS NULL`).
fn push_scope(qb: &mut QueryBuilder<'_, Sqlite>, col: &str, scope: &Scope) {
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

    async fn create_run(&self, run: NewRun, now: Millis) -> StoreResult<Run> {
        let row = insert_run(&self.writer, &run, now, false)
            .await
            .map_err(|e| match db(e) {
                StoreError::Conflict(_) => StoreError::Conflict(format!("run `{}`", run.id)),
                other => other,
            })?
            .ok_or_else(|| StoreError::Conflict(format!("run `{}`", run.id)))?;
        run_from_row(&row)
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
        let rows = qb.build().fetch_all(&self.writer).await.map_err(db)?;
        rows.iter().map(run_from_row).collect()
    }

    async fn sweep_abandoned(
        &self,
        scope: &Scope,
        max_recoveries: u32,
        now: Millis,
    ) -> StoreResult<Vec<Run>> {
        let mut tx = self.writer.begin().await.map_err(db)?;
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
        let mut ended = qb.build().fetch_all(&mut *tx).await.map_err(db)?;
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
        ended.extend(qb.build().fetch_all(&mut *tx).await.map_err(db)?);
        let ended = ended
            .iter()
            .map(run_from_row)
            .collect::<StoreResult<Vec<_>>>()?;
        for run in &ended {
            if let Some(parent) = &run.parent_run_id {
                settle_parent(&mut tx, parent, run, now).await?;
            }
        }
        tx.commit().await.map_err(db)?;
        Ok(ended)
    }

    async fn renew_leases(&self, owner: &str, ids: &[RunId], until: Millis) -> StoreResult<u64> {
        if ids.is_empty() {
            return Ok(0);
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
        Ok(qb
            .build()
            .execute(&self.writer)
            .await
            .map_err(db)?
            .rows_affected())
    }

    async fn commit_turn(
        &self,
        owner: &str,
        id: &RunId,
        commit: TurnCommit,
        now: Millis,
    ) -> StoreResult<Option<Run>> {
        let (status, output, error, wake_at, finished_at) = match &commit.outcome {
            TurnOutcome::Suspend { wake_at } => (RunStatus::Suspended, None, None, *wake_at, None),
            TurnOutcome::Complete(out) => (
                RunStatus::Completed,
                Some(to_json(out)),
                None,
                None,
                Some(now),
            ),
            TurnOutcome::Fail(err) => {
                (RunStatus::Failed, None, Some(to_json(err)), None, Some(now))
            }
            TurnOutcome::Block(reason) => {
                (RunStatus::Blocked, None, Some(to_json(reason)), None, None)
            }
            TurnOutcome::Continue(next) => (
                RunStatus::Continued,
                Some(to_json(&serde_json::json!({ "continuedAs": next.id }))),
                None,
                None,
                Some(now),
            ),
        };
        let mut tx = self.writer.begin().await.map_err(db)?;
        // A result that landed during the turn set `needs_wake`: resume at once instead of
        // sleeping until the timer (or forever).
        let sql = format!(
            "UPDATE runs SET status = ?, output = ?, error = ?, \
             wake_at = CASE WHEN needs_wake = 1 AND ? = 'suspended' THEN ? ELSE ? END, needs_wake = 0, \
             locked_by = NULL, locked_until = NULL, updated_at = ?, finished_at = ? \
             WHERE id = ? AND status = 'running' AND locked_by = ? RETURNING {RUN_COLS}"
        );
        let row = sqlx::query(&sql)
            .bind(status.as_str())
            .bind(output)
            .bind(error)
            .bind(status.as_str())
            .bind(now)
            .bind(wake_at)
            .bind(now)
            .bind(finished_at)
            .bind(id.as_str())
            .bind(owner)
            .fetch_optional(&mut *tx)
            .await
            .map_err(db)?;
        let Some(row) = row else {
            return Ok(None);
        };
        for cp in &commit.checkpoints {
            sqlx::query(
                "INSERT INTO checkpoints (run_id, seq, kind, name, status, attempts, worker_group, input, \
                 output, error, wake_at, enqueued_at, started_at, finished_at, retry_policy) \
                 VALUES (?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (run_id, seq) DO NOTHING",
            )
            .bind(id.as_str())
            .bind(i64::from(cp.seq))
            .bind(cp.kind.as_str())
            .bind(&cp.name)
            .bind(cp.status.as_str())
            .bind(cp.worker_group.as_deref())
            .bind(cp.input.as_ref().map(to_json))
            .bind(cp.output.as_ref().map(to_json))
            .bind(cp.error.as_ref().map(to_json))
            .bind(cp.wake_at)
            .bind(cp.enqueued_at)
            .bind(cp.started_at)
            .bind(cp.finished_at)
            .bind(cp.retry_policy.as_ref().map(to_json))
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        }
        for seq in &commit.redispatched {
            sqlx::query(
                "UPDATE checkpoints SET enqueued_at = ? \
                 WHERE run_id = ? AND seq = ? AND kind = 'remote_step' AND status = 'pending' AND enqueued_at IS NULL",
            )
            .bind(now)
            .bind(id.as_str())
            .bind(i64::from(*seq))
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        }
        for seq in &commit.fired_timers {
            let fired = Resolution::Completed(None);
            resolve_pending(
                &mut tx,
                id,
                i64::from(*seq),
                CheckpointKind::Sleep,
                fired,
                now,
            )
            .await?;
        }
        for (signal_id, seq) in &commit.consumed_signals {
            let payload: Option<String> = sqlx::query_scalar(
                "UPDATE signals SET consumed_seq = ? WHERE id = ? AND run_id = ? AND consumed_seq IS NULL \
                 RETURNING payload",
            )
            .bind(i64::from(*seq))
            .bind(signal_id)
            .bind(id.as_str())
            .fetch_optional(&mut *tx)
            .await
            .map_err(db)?;
            let Some(payload) = payload else {
                // Taken by another wait meanwhile: this turn's view was stale; discard it.
                return Ok(None);
            };
            let got = Resolution::Completed(Some(payload));
            resolve_pending(
                &mut tx,
                id,
                i64::from(*seq),
                CheckpointKind::Signal,
                got,
                now,
            )
            .await?;
        }
        for seq in &commit.timed_out_signals {
            let timeout = StepFailure::new("the signal wait timed out").with_code("timeout");
            let timed_out = Resolution::Failed(to_json(&timeout));
            resolve_pending(
                &mut tx,
                id,
                i64::from(*seq),
                CheckpointKind::Signal,
                timed_out,
                now,
            )
            .await?;
        }
        for child in &commit.children {
            if insert_run(&mut *tx, child, now, true)
                .await
                .map_err(db)?
                .is_none()
            {
                // The child exists (a retried parent re-issues it): if it already ended, settle
                // the new wait at once.
                let sql = format!("SELECT {RUN_COLS} FROM runs WHERE id = ?");
                let existing = sqlx::query(&sql)
                    .bind(child.id.as_str())
                    .fetch_one(&mut *tx)
                    .await
                    .map_err(db)?;
                let existing = run_from_row(&existing)?;
                if existing.status.is_terminal() {
                    settle_parent(&mut tx, id, &existing, now).await?;
                }
            }
        }
        let run = run_from_row(&row)?;
        if let TurnOutcome::Continue(next) = &commit.outcome {
            insert_run(&mut *tx, next, now, true).await.map_err(db)?;
        }
        let cancelled = StepFailure::new(format!("cancelled: a sibling under run {id} failed"))
            .with_code("cancelled");
        for child in &commit.cancel_runs {
            // Only this run's own children, never anything else.
            let sql = format!(
                "UPDATE runs SET status = CASE WHEN status = 'running' THEN 'cancelling' ELSE 'cancelled' END, \
                 error = ?, updated_at = ?, \
                 finished_at = CASE WHEN status = 'running' THEN finished_at ELSE ? END, \
                 wake_at = NULL \
                 WHERE id = ? AND parent_run_id = ? AND status IN ('pending', 'suspended', 'blocked', 'running') \
                 RETURNING {RUN_COLS}"
            );
            let row = sqlx::query(&sql)
                .bind(to_json(&cancelled))
                .bind(now)
                .bind(now)
                .bind(child.as_str())
                .bind(id.as_str())
                .fetch_optional(&mut *tx)
                .await
                .map_err(db)?;
            if let Some(row) = row {
                let child = run_from_row(&row)?;
                if settles_parent(child.status) {
                    settle_parent(&mut tx, id, &child, now).await?;
                }
            }
        }
        if let (Some(parent), true) = (&run.parent_run_id, settles_parent(run.status)) {
            settle_parent(&mut tx, parent, &run, now).await?;
        }
        tx.commit().await.map_err(db)?;
        Ok(Some(run))
    }

    async fn apply_step_result(
        &self,
        result: &StepResult,
        now: Millis,
    ) -> StoreResult<Option<StepApplied>> {
        let mut tx = self.writer.begin().await.map_err(db)?;
        // Wake the run first: a result for a finished, cancelled or parked run is dropped.
        let sql = format!(
            "UPDATE runs SET needs_wake = 1, updated_at = ?, \
             wake_at = CASE WHEN status = 'suspended' THEN ? ELSE wake_at END \
             WHERE id = ? AND status IN ('pending', 'suspended', 'running') RETURNING {RUN_COLS}"
        );
        let Some(run_row) = sqlx::query(&sql)
            .bind(now)
            .bind(now)
            .bind(result.run_id.as_str())
            .fetch_optional(&mut *tx)
            .await
            .map_err(db)?
        else {
            return Ok(None);
        };
        if let StepOutcome::Failed { error } = &result.outcome
            && let Some(cp_row) = schedule_retry(&mut tx, result, error, now).await?
        {
            tx.commit().await.map_err(db)?;
            return Ok(Some(StepApplied {
                run: run_from_row(&run_row)?,
                checkpoint: checkpoint_from_row(&cp_row)?,
            }));
        }
        let (status, output, error) = match &result.outcome {
            StepOutcome::Completed { output } => {
                (CheckpointStatus::Completed, Some(to_json(output)), None)
            }
            StepOutcome::Failed { error } => (CheckpointStatus::Failed, None, Some(to_json(error))),
        };
        let sql = format!(
            "UPDATE checkpoints SET status = ?, output = ?, error = ?, finished_at = ?, \
             started_at = COALESCE(?, started_at) \
             WHERE run_id = ? AND seq = ? AND kind = 'remote_step' AND status IN ('pending', 'running') \
             RETURNING {CHECKPOINT_COLS}"
        );
        let Some(cp_row) = sqlx::query(&sql)
            .bind(status.as_str())
            .bind(output)
            .bind(error)
            .bind(now)
            .bind(result.started_at)
            .bind(result.run_id.as_str())
            .bind(i64::from(result.seq))
            .fetch_optional(&mut *tx)
            .await
            .map_err(db)?
        else {
            // Duplicate or unknown step: roll the wake-up back.
            return Ok(None);
        };
        tx.commit().await.map_err(db)?;
        Ok(Some(StepApplied {
            run: run_from_row(&run_row)?,
            checkpoint: checkpoint_from_row(&cp_row)?,
        }))
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
        sqlx::query("UPDATE checkpoints SET enqueued_at = ? WHERE run_id = ? AND seq = ? AND status = 'pending'")
            .bind(now)
            .bind(id.as_str())
            .bind(i64::from(seq))
            .execute(&self.writer)
            .await
            .map_err(db)?;
        Ok(())
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
        if expected.is_empty() {
            return Ok(None);
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
        let mut tx = self.writer.begin().await.map_err(db)?;
        let Some(row) = qb.build().fetch_optional(&mut *tx).await.map_err(db)? else {
            return Ok(None);
        };
        let run = run_from_row(&row)?;
        if let (Some(parent), true) = (&run.parent_run_id, settles_parent(run.status)) {
            settle_parent(&mut tx, parent, &run, now).await?;
        }
        tx.commit().await.map_err(db)?;
        Ok(Some(run))
    }

    async fn retry_run(&self, scope: &Scope, id: &RunId, now: Millis) -> StoreResult<Option<Run>> {
        let mut tx = self.writer.begin().await.map_err(db)?;
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
        let Some(row) = qb.build().fetch_optional(&mut *tx).await.map_err(db)? else {
            return Ok(None);
        };
        sqlx::query(
            "DELETE FROM checkpoints WHERE run_id = ? AND seq >= \
             (SELECT MIN(seq) FROM checkpoints WHERE run_id = ? AND status = 'failed')",
        )
        .bind(id.as_str())
        .bind(id.as_str())
        .execute(&mut *tx)
        .await
        .map_err(db)?;
        tx.commit().await.map_err(db)?;
        run_from_row(&row).map(Some)
    }

    async fn send_signal(
        &self,
        scope: &Scope,
        id: &RunId,
        name: &str,
        payload: &Value,
        now: Millis,
    ) -> StoreResult<SignalSent> {
        let mut tx = self.writer.begin().await.map_err(db)?;
        let mut qb = QueryBuilder::new(format!("SELECT {RUN_COLS} FROM runs WHERE id = "));
        qb.push_bind(id.as_str().to_owned());
        push_scope(&mut qb, "namespace", scope);
        let Some(row) = qb.build().fetch_optional(&mut *tx).await.map_err(db)? else {
            return Ok(SignalSent::NotFound);
        };
        let run = run_from_row(&row)?;
        if run.status.is_terminal() {
            return Ok(SignalSent::RunFinished(run));
        }
        sqlx::query("INSERT INTO signals (run_id, name, payload, created_at) VALUES (?, ?, ?, ?)")
            .bind(id.as_str())
            .bind(name)
            .bind(to_json(payload))
            .bind(now)
            .execute(&mut *tx)
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
            .fetch_one(&mut *tx)
            .await
            .map_err(db)?;
        tx.commit().await.map_err(db)?;
        Ok(SignalSent::Delivered(run_from_row(&row)?))
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

    async fn release_leases(&self, owner: &str, now: Millis) -> StoreResult<u64> {
        let done = sqlx::query(
            "UPDATE runs SET status = 'pending', locked_by = NULL, locked_until = NULL, updated_at = ? \
             WHERE status = 'running' AND locked_by = ?",
        )
        .bind(now)
        .bind(owner)
        .execute(&self.writer)
        .await
        .map_err(db)?;
        Ok(done.rows_affected())
    }
}

/// If the failed step may be retried (retryable error, tries left in its policy), keeps its
/// checkpoint pending with the backoff as `wake_at` and no dispatch time; the run's next turn
/// dispatches it once due. Returns the updated checkpoint, or `None` when the failure is final.
async fn schedule_retry(
    tx: &mut sqlx::Transaction<'_, Sqlite>,
    result: &StepResult,
    error: &StepFailure,
    now: Millis,
) -> StoreResult<Option<SqliteRow>> {
    if !error.is_retryable() {
        return Ok(None);
    }
    let row: Option<(i64, Option<String>)> = sqlx::query_as(
        "SELECT attempts, retry_policy FROM checkpoints \
         WHERE run_id = ? AND seq = ? AND kind = 'remote_step' AND status IN ('pending', 'running')",
    )
    .bind(result.run_id.as_str())
    .bind(i64::from(result.seq))
    .fetch_optional(&mut **tx)
    .await
    .map_err(db)?;
    let Some((attempts, Some(policy))) = row else {
        return Ok(None);
    };
    let policy: RetryPolicy = from_json(&policy, "checkpoint retry policy")?;
    let attempts = u32::try_from(attempts).unwrap_or(u32::MAX);
    if attempts >= policy.max_attempts {
        return Ok(None);
    }
    let spread: f64 = rand::random::<f64>() * 2.0 - 1.0;
    let due =
        now.saturating_add(i64::try_from(policy.delay_ms(attempts, spread)).unwrap_or(i64::MAX));
    let sql = format!(
        "UPDATE checkpoints SET attempts = attempts + 1, enqueued_at = NULL, wake_at = ?, error = ?, \
         started_at = COALESCE(?, started_at) \
         WHERE run_id = ? AND seq = ? AND kind = 'remote_step' AND status IN ('pending', 'running') \
         RETURNING {CHECKPOINT_COLS}"
    );
    sqlx::query(&sql)
        .bind(due)
        .bind(to_json(error))
        .bind(result.started_at)
        .bind(result.run_id.as_str())
        .bind(i64::from(result.seq))
        .fetch_optional(&mut **tx)
        .await
        .map_err(db)
}

/// How a pending checkpoint resolves: completed (with an output, JSON text) or failed (with
/// an error, JSON text).
enum Resolution {
    Completed(Option<String>),
    Failed(String),
}

/// Resolves checkpoint `(run, seq)` of `kind` if it is still pending; returns how many rows
/// changed (0 when it was already resolved, so a late or repeated resolution is a no-op).
async fn resolve_pending(
    tx: &mut sqlx::Transaction<'_, Sqlite>,
    run: &RunId,
    seq: i64,
    kind: CheckpointKind,
    resolution: Resolution,
    now: Millis,
) -> StoreResult<u64> {
    let (status, output, error) = match resolution {
        Resolution::Completed(output) => (CheckpointStatus::Completed, output, None),
        Resolution::Failed(error) => (CheckpointStatus::Failed, None, Some(error)),
    };
    let done = sqlx::query(
        "UPDATE checkpoints SET status = ?, output = ?, error = ?, finished_at = ? \
         WHERE run_id = ? AND seq = ? AND kind = ? AND status = 'pending'",
    )
    .bind(status.as_str())
    .bind(output)
    .bind(error)
    .bind(now)
    .bind(run.as_str())
    .bind(seq)
    .bind(kind.as_str())
    .execute(&mut **tx)
    .await
    .map_err(db)?;
    Ok(done.rows_affected())
}

/// Whether a child ending in `status` settles its parent's wait: every terminal status but
/// `continued`, whose successor settles it instead.
fn settles_parent(status: RunStatus) -> bool {
    status.is_terminal() && status != RunStatus::Continued
}

/// Resolves the parent's wait on `child` with the child's outcome and wakes the parent, in the
/// child's final transaction (so a parent never misses its child's end).
async fn settle_parent(
    tx: &mut sqlx::Transaction<'_, Sqlite>,
    parent: &RunId,
    child: &Run,
    now: Millis,
) -> StoreResult<()> {
    // `<parent>.child.<seq>`, or `<parent>.child.<seq>:c<n>` for its ContinueAsNew successors.
    let Some(seq) = child
        .id
        .as_str()
        .rsplit_once(".child.")
        .and_then(|(_, s)| s.split(':').next())
        .and_then(|s| s.parse::<i64>().ok())
    else {
        return Ok(());
    };
    let resolution = match child.status {
        RunStatus::Completed => Resolution::Completed(Some(to_json(&child.output))),
        other => {
            let failure = child.error.clone().unwrap_or_else(|| {
                StepFailure::new(format!("child run {} ended {other}", child.id))
            });
            Resolution::Failed(to_json(&failure))
        }
    };
    let settled = resolve_pending(tx, parent, seq, CheckpointKind::Child, resolution, now).await?;
    if settled > 0 {
        sqlx::query(
            "UPDATE runs SET needs_wake = 1, updated_at = ?, \
             wake_at = CASE WHEN status = 'suspended' THEN ? ELSE wake_at END \
             WHERE id = ? AND status IN ('pending', 'suspended', 'running')",
        )
        .bind(now)
        .bind(now)
        .bind(parent.as_str())
        .execute(&mut **tx)
        .await
        .map_err(db)?;
    }
    Ok(())
}

fn user_from_row(row: &SqliteRow) -> StoreResult<User> {
    let get = |e: sqlx::Error| StoreError::Corrupt(e.to_string());
    let tenant: Option<String> = row.try_get("tenant").map_err(get)?;
    let role: String = row.try_get("role").map_err(get)?;
    Ok(User {
        id: row.try_get("id").map_err(get)?,
        email: row.try_get("email").map_err(get)?,
        tenant: tenant.map(|t| Namespace::from_stored(Some(&t))),
        role: role.parse::<Role>().map_err(StoreError::Corrupt)?,
        password_hash: row.try_get("password_hash").map_err(get)?,
    })
}

#[async_trait]
impl Accounts for SqliteStore {
    async fn create_user(&self, user: NewUser, now: Millis) -> StoreResult<User> {
        let row = sqlx::query(
            "INSERT INTO users (email, tenant, role, password_hash, created_at) VALUES (?, ?, ?, ?, ?) \
             RETURNING id, email, tenant, role, password_hash",
        )
        .bind(&user.email)
        .bind(user.tenant.as_ref().map(Namespace::as_str))
        .bind(user.role.as_str())
        .bind(&user.password_hash)
        .bind(now)
        .fetch_one(&self.writer)
        .await
        .map_err(|e| match db(e) {
            StoreError::Conflict(_) => StoreError::Conflict(format!("user `{}`", user.email)),
            other => other,
        })?;
        user_from_row(&row)
    }

    async fn user_by_email(&self, email: &str) -> StoreResult<Option<User>> {
        let row =
            sqlx::query("SELECT id, email, tenant, role, password_hash FROM users WHERE email = ?")
                .bind(email)
                .fetch_optional(&self.reader)
                .await
                .map_err(db)?;
        row.as_ref().map(user_from_row).transpose()
    }

    async fn user_by_id(&self, id: i64) -> StoreResult<Option<User>> {
        let row =
            sqlx::query("SELECT id, email, tenant, role, password_hash FROM users WHERE id = ?")
                .bind(id)
                .fetch_optional(&self.reader)
                .await
                .map_err(db)?;
        row.as_ref().map(user_from_row).transpose()
    }

    async fn count_users(&self) -> StoreResult<u64> {
        let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM users")
            .fetch_one(&self.reader)
            .await
            .map_err(db)?;
        Ok(n as u64)
    }

    async fn setting_or_insert(&self, key: &str, make: String) -> StoreResult<String> {
        sqlx::query("INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING")
            .bind(key)
            .bind(make)
            .execute(&self.writer)
            .await
            .map_err(db)?;
        sqlx::query_scalar("SELECT value FROM settings WHERE key = ?")
            .bind(key)
            .fetch_one(&self.writer)
            .await
            .map_err(db)
    }
}
