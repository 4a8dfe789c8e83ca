//! Row mapping and the statements several operations share.

use serde::de::DeserializeOwned;
use serde_json::Value;
use sqlx::postgres::PgRow;
use sqlx::{PgConnection, Postgres, Row};

use super::values::{FirstState, RunValues, params};
use crate::model::{Checkpoint, CheckpointKind, CheckpointStatus, Millis, Namespace, Run, RunId};
use crate::store::columns::concurrency_slot;
use crate::store::rules::turn::id_taken;
use crate::store::{NewRun, StoreError, StoreResult};

pub(super) use crate::store::columns::{CHECKPOINT_COLS, RUN_COLS};

/// Maps a driver error: a uniqueness violation is a [`StoreError::Conflict`], a value the
/// database cannot keep (SQLSTATE class 22, data exception, or 54, a program limit such as an
/// index row too large) is [`StoreError::Refused`], anything else leaves the database
/// unavailable for this call.
pub(super) fn db(e: sqlx::Error) -> StoreError {
    if let sqlx::Error::Database(d) = &e {
        if d.is_unique_violation() {
            return StoreError::Conflict(d.message().to_owned());
        }
        if d.code()
            .is_some_and(|c| c.starts_with("22") || c.starts_with("54"))
        {
            return StoreError::Refused(d.message().to_owned());
        }
    }
    crate::metrics::store_error("postgres");
    StoreError::Unavailable(Box::new(e))
}

fn get<T>(row: &PgRow, idx: usize, name: &str) -> StoreResult<T>
where
    T: for<'r> sqlx::Decode<'r, Postgres> + sqlx::Type<Postgres>,
{
    row.try_get(idx)
        .map_err(|e| StoreError::Corrupt(format!("column `{name}`: {e}")))
}

fn json<T: DeserializeOwned>(value: Value, what: &str) -> StoreResult<T> {
    serde_json::from_value(value).map_err(|e| StoreError::Corrupt(format!("{what}: {e}")))
}

fn opt_json<T: DeserializeOwned>(value: Option<Value>, what: &str) -> StoreResult<Option<T>> {
    value.map(|v| json(v, what)).transpose()
}

pub(super) fn run_id(raw: String) -> StoreResult<RunId> {
    RunId::parse(&raw).map_err(|e| StoreError::Corrupt(e.to_string()))
}

fn opt_run_id(raw: Option<String>) -> StoreResult<Option<RunId>> {
    raw.map(run_id).transpose()
}

/// A run, from a row that selected [`RUN_COLS`] first (columns are read by position).
pub(super) fn run_from_row(row: &PgRow) -> StoreResult<Run> {
    let status: String = get(row, 4, "status")?;
    Ok(Run {
        id: run_id(get(row, 0, "id")?)?,
        namespace: Namespace::from_stored(get::<Option<String>>(row, 1, "namespace")?.as_deref()),
        workflow: get(row, 2, "workflow")?,
        workflow_version: get::<i32>(row, 3, "workflow_version")? as u32,
        status: status
            .parse()
            .map_err(|e: crate::model::UnknownStatus| StoreError::Corrupt(e.to_string()))?,
        input: get(row, 5, "input")?,
        output: get(row, 6, "output")?,
        error: opt_json(get(row, 7, "error")?, "run error")?,
        tags: json(get(row, 8, "tags")?, "run tags")?,
        search_attributes: json(get(row, 9, "search_attributes")?, "run search attributes")?,
        parent_run_id: opt_run_id(get(row, 10, "parent_run_id")?)?,
        root_run_id: run_id(get(row, 11, "root_run_id")?)?,
        nesting_depth: get::<i32>(row, 12, "nesting_depth")? as u32,
        retry_of: opt_run_id(get(row, 13, "retry_of")?)?,
        continued_from: opt_run_id(get(row, 14, "continued_from")?)?,
        attempt: get::<i32>(row, 15, "attempt")? as u32,
        wake_at: get(row, 16, "wake_at")?,
        locked_by: get(row, 17, "locked_by")?,
        locked_until: get(row, 18, "locked_until")?,
        created_at: get(row, 19, "created_at")?,
        updated_at: get(row, 20, "updated_at")?,
        finished_at: get(row, 21, "finished_at")?,
        concurrency: concurrency_slot(
            get(row, 22, "concurrency_key")?,
            get::<Option<i32>>(row, 23, "concurrency_limit")?.map(i64::from),
        ),
        admitted_attempt: get::<i32>(row, 24, "admitted_attempt")? as u32,
        deadline_at: get(row, 25, "deadline_at")?,
        traceparent: get(row, 26, "traceparent")?,
    })
}

/// A checkpoint, from a row that selected [`CHECKPOINT_COLS`] first.
pub(super) fn checkpoint_from_row(row: &PgRow) -> StoreResult<Checkpoint> {
    let kind: String = get(row, 2, "kind")?;
    let status: String = get(row, 4, "status")?;
    Ok(Checkpoint {
        run_id: run_id(get(row, 0, "run_id")?)?,
        seq: get::<i32>(row, 1, "seq")? as u32,
        kind: CheckpointKind::parse(&kind)
            .ok_or_else(|| StoreError::Corrupt(format!("checkpoint kind `{kind}`")))?,
        name: get(row, 3, "name")?,
        status: CheckpointStatus::parse(&status)
            .ok_or_else(|| StoreError::Corrupt(format!("checkpoint status `{status}`")))?,
        attempts: get::<i32>(row, 5, "attempts")? as u32,
        worker_group: get(row, 6, "worker_group")?,
        input: get(row, 7, "input")?,
        output: get(row, 8, "output")?,
        error: opt_json(get(row, 9, "error")?, "checkpoint error")?,
        wake_at: get(row, 10, "wake_at")?,
        enqueued_at: get(row, 11, "enqueued_at")?,
        started_at: get(row, 12, "started_at")?,
        finished_at: get(row, 13, "finished_at")?,
        retry_policy: opt_json(get(row, 14, "retry_policy")?, "checkpoint retry policy")?,
        timeout_ms: get::<Option<i64>>(row, 15, "timeout_ms")?.map(|ms| ms.max(0) as u64),
        priority: get(row, 16, "priority")?,
        slot: get(row, 17, "slot")?,
        saga: opt_json(get(row, 18, "saga")?, "checkpoint saga")?,
        route: opt_json(get(row, 19, "route")?, "checkpoint route")?,
    })
}

/// Inserts a new run, its columns bound by [`RunValues::bind`] as `$1`–`$22`.
pub(super) static INSERT_RUN: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "INSERT INTO runs ({}, needs_wake) VALUES ({}, FALSE)",
        RunValues::COLUMNS.join(", "),
        params(RunValues::TYPES, 1, false)
    )
});

/// Inserts a `pending` run, or with `lease` (`owner`, `until`) a `running` one locked by
/// `owner`; with `keep_existing`, an existing id is left alone (and `None` returned) instead of
/// failing with [`StoreError::Conflict`].
pub(super) async fn insert_run(
    conn: &mut PgConnection,
    run: &NewRun,
    now: Millis,
    keep_existing: bool,
    lease: Option<(&str, Millis)>,
) -> StoreResult<Option<Run>> {
    let on_conflict = if keep_existing {
        " ON CONFLICT (id) DO NOTHING"
    } else {
        ""
    };
    let sql = format!("{}{on_conflict} RETURNING {RUN_COLS}", *INSERT_RUN);
    let row = RunValues::of(run, now, FirstState::claimed_by(lease))
        .bind(sqlx::query(&sql))
        .fetch_optional(&mut *conn)
        .await
        .map_err(|e| match db(e) {
            StoreError::Conflict(_) => id_taken(&run.id),
            other => other,
        })?;
    row.as_ref().map(run_from_row).transpose()
}

/// One run by id, whatever its namespace (for writes that already checked visibility).
pub(super) async fn run_by_id(conn: &mut PgConnection, id: &RunId) -> StoreResult<Option<Run>> {
    let row = sqlx::query(&format!("SELECT {RUN_COLS} FROM runs WHERE id = $1"))
        .bind(id.as_str())
        .fetch_optional(&mut *conn)
        .await
        .map_err(db)?;
    row.as_ref().map(run_from_row).transpose()
}
