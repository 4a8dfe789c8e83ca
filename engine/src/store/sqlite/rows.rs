//! Row mapping and the statements several operations share.

use serde::Serialize;
use serde::de::DeserializeOwned;
use sqlx::sqlite::SqliteRow;
use sqlx::{Row, Sqlite};

use crate::model::{
    Checkpoint, CheckpointKind, CheckpointStatus, Millis, Namespace, Run, RunId, RunStatus,
};
use crate::store::{NewRun, StoreError, StoreResult};

pub(super) const RUN_COLS: &str = "id, namespace, workflow, workflow_version, status, input, output, error, \
    tags, search_attributes, parent_run_id, root_run_id, nesting_depth, retry_of, continued_from, \
    attempt, wake_at, locked_by, locked_until, created_at, updated_at, finished_at";

pub(super) const CHECKPOINT_COLS: &str = "run_id, seq, kind, name, status, attempts, worker_group, input, \
    output, error, wake_at, enqueued_at, started_at, finished_at, retry_policy, timeout_ms";

pub(super) fn db(e: sqlx::Error) -> StoreError {
    if let sqlx::Error::Database(d) = &e
        && d.is_unique_violation()
    {
        return StoreError::Conflict(d.message().to_owned());
    }
    StoreError::Unavailable(Box::new(e))
}

pub(super) fn to_json<T: Serialize>(v: &T) -> String {
    // Serialising plain data (Values, strings, failures) to a String cannot fail.
    serde_json::to_string(v).unwrap_or_else(|_| "null".to_owned())
}

pub(super) fn from_json<T: DeserializeOwned>(raw: &str, what: &str) -> StoreResult<T> {
    serde_json::from_str(raw).map_err(|e| StoreError::Corrupt(format!("{what}: {e}")))
}

pub(super) fn opt_json<T: DeserializeOwned>(
    raw: Option<String>,
    what: &str,
) -> StoreResult<Option<T>> {
    raw.map(|r| from_json(&r, what)).transpose()
}

pub(super) fn run_id(raw: String) -> StoreResult<RunId> {
    RunId::parse(&raw).map_err(|e| StoreError::Corrupt(e.to_string()))
}

pub(super) fn opt_run_id(raw: Option<String>) -> StoreResult<Option<RunId>> {
    raw.map(run_id).transpose()
}

pub(super) fn run_from_row(row: &SqliteRow) -> StoreResult<Run> {
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

pub(super) fn checkpoint_from_row(row: &SqliteRow) -> StoreResult<Checkpoint> {
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
        timeout_ms: row
            .try_get::<Option<i64>, _>("timeout_ms")
            .map_err(get)?
            .map(|ms| ms.max(0) as u64),
        retry_policy: opt_json(
            row.try_get("retry_policy").map_err(get)?,
            "checkpoint retry policy",
        )?,
    })
}

/// Inserts a `pending` run, or with `lease` (`owner`, `until`) a `running` one locked by
/// `owner`; with `keep_existing`, an existing id is left alone (and `None` returned) instead of
/// failing.
pub(super) async fn insert_run<'e, E>(
    executor: E,
    run: &NewRun,
    now: Millis,
    keep_existing: bool,
    lease: Option<(&str, Millis)>,
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
         created_at, updated_at, locked_by, locked_until, attempt) \
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?){conflict} \
         RETURNING {RUN_COLS}"
    );
    let status = if lease.is_some() {
        RunStatus::Running
    } else {
        RunStatus::Pending
    };
    sqlx::query(&sql)
        .bind(run.id.as_str())
        .bind(run.namespace.as_str())
        .bind(&run.workflow)
        .bind(i64::from(run.workflow_version))
        .bind(status.as_str())
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
        .bind(lease.map(|(owner, _)| owner))
        .bind(lease.map(|(_, until)| until))
        .bind(i64::from(lease.is_some()))
        .fetch_optional(executor)
        .await
}
