//! Row mapping and the statements several operations share.

use rusqlite::{Connection, Row};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::sql::{Sql, db};
use crate::model::{
    Checkpoint, CheckpointKind, CheckpointStatus, Millis, Namespace, Run, RunId, RunStatus,
};
use crate::store::rules::turn::id_taken;
use crate::store::{NewRun, StoreError, StoreResult};

use crate::store::columns::concurrency_slot;
pub(super) use crate::store::columns::{CHECKPOINT_COLS, RUN_COLS};

pub(super) fn to_json<T: Serialize>(v: &T) -> String {
    // Serialising plain data (Values, strings, failures) to a String cannot fail.
    serde_json::to_string(v).unwrap_or_else(|_| "null".to_owned())
}

pub(super) fn from_json<T: DeserializeOwned>(raw: &str, what: &str) -> StoreResult<T> {
    serde_json::from_str(raw).map_err(|e| StoreError::Corrupt(format!("{what}: {e}")))
}

fn opt_json<T: DeserializeOwned>(raw: Option<String>, what: &str) -> StoreResult<Option<T>> {
    raw.map(|r| from_json(&r, what)).transpose()
}

pub(super) fn run_id(raw: String) -> StoreResult<RunId> {
    RunId::parse(&raw).map_err(|e| StoreError::Corrupt(e.to_string()))
}

fn opt_run_id(raw: Option<String>) -> StoreResult<Option<RunId>> {
    raw.map(run_id).transpose()
}

/// Reads column `col`; a type mismatch means the row is not what this code wrote.
pub(super) fn col<T: rusqlite::types::FromSql>(row: &Row<'_>, col: &str) -> StoreResult<T> {
    row.get(col)
        .map_err(|e| StoreError::Corrupt(format!("column `{col}`: {e}")))
}

/// Reads column `name` at position `idx` of [`RUN_COLS`] or [`CHECKPOINT_COLS`], which every
/// query selects first and in that order (by position: a lookup by name scans every column).
fn at<T: rusqlite::types::FromSql>(row: &Row<'_>, idx: usize, name: &str) -> StoreResult<T> {
    row.get(idx)
        .map_err(|e| StoreError::Corrupt(format!("column `{name}`: {e}")))
}

pub(super) fn run_from_row(row: &Row<'_>) -> StoreResult<Run> {
    let status: String = at(row, 4, "status")?;
    Ok(Run {
        id: run_id(at(row, 0, "id")?)?,
        namespace: Namespace::from_stored(col::<Option<String>>(row, "namespace")?.as_deref()),
        workflow: at(row, 2, "workflow")?,
        workflow_version: at::<i64>(row, 3, "workflow_version")? as u32,
        status: status
            .parse()
            .map_err(|e: crate::model::UnknownStatus| StoreError::Corrupt(e.to_string()))?,
        input: from_json(&at::<String>(row, 5, "input")?, "run input")?,
        output: opt_json(at(row, 6, "output")?, "run output")?,
        error: opt_json(at(row, 7, "error")?, "run error")?,
        tags: from_json(&at::<String>(row, 8, "tags")?, "run tags")?,
        search_attributes: from_json(
            &at::<String>(row, 9, "search_attributes")?,
            "run search attributes",
        )?,
        parent_run_id: opt_run_id(at(row, 10, "parent_run_id")?)?,
        root_run_id: run_id(at(row, 11, "root_run_id")?)?,
        nesting_depth: at::<i64>(row, 12, "nesting_depth")? as u32,
        retry_of: opt_run_id(at(row, 13, "retry_of")?)?,
        continued_from: opt_run_id(at(row, 14, "continued_from")?)?,
        attempt: at::<i64>(row, 15, "attempt")? as u32,
        wake_at: at(row, 16, "wake_at")?,
        locked_by: at(row, 17, "locked_by")?,
        locked_until: at(row, 18, "locked_until")?,
        created_at: at(row, 19, "created_at")?,
        updated_at: at(row, 20, "updated_at")?,
        finished_at: at(row, 21, "finished_at")?,
        concurrency: concurrency_slot(
            at(row, 22, "concurrency_key")?,
            at(row, 23, "concurrency_limit")?,
        ),
        admitted_attempt: at::<i64>(row, 24, "admitted_attempt")? as u32,
        deadline_at: at(row, 25, "deadline_at")?,
        traceparent: at(row, 26, "traceparent")?,
    })
}

pub(super) fn checkpoint_from_row(row: &Row<'_>) -> StoreResult<Checkpoint> {
    let kind: String = at(row, 2, "kind")?;
    let status: String = at(row, 4, "status")?;
    Ok(Checkpoint {
        run_id: run_id(at(row, 0, "run_id")?)?,
        seq: at::<i64>(row, 1, "seq")? as u32,
        kind: CheckpointKind::parse(&kind)
            .ok_or_else(|| StoreError::Corrupt(format!("checkpoint kind `{kind}`")))?,
        name: at(row, 3, "name")?,
        status: CheckpointStatus::parse(&status)
            .ok_or_else(|| StoreError::Corrupt(format!("checkpoint status `{status}`")))?,
        attempts: at::<i64>(row, 5, "attempts")? as u32,
        worker_group: at(row, 6, "worker_group")?,
        input: opt_json(at(row, 7, "input")?, "checkpoint input")?,
        output: opt_json(at(row, 8, "output")?, "checkpoint output")?,
        error: opt_json(at(row, 9, "error")?, "checkpoint error")?,
        wake_at: at(row, 10, "wake_at")?,
        enqueued_at: at(row, 11, "enqueued_at")?,
        started_at: at(row, 12, "started_at")?,
        finished_at: at(row, 13, "finished_at")?,
        retry_policy: opt_json(at(row, 14, "retry_policy")?, "checkpoint retry policy")?,
        timeout_ms: col::<Option<i64>>(row, "timeout_ms")?.map(|ms| ms.max(0) as u64),
        priority: at(row, 16, "priority")?,
        slot: at(row, 17, "slot")?,
        saga: opt_json(at(row, 18, "saga")?, "checkpoint saga")?,
        route: opt_json(at(row, 19, "route")?, "checkpoint route")?,
    })
}

/// Inserts a `pending` run, or with `lease` (`owner`, `until`) a `running` one locked by
/// `owner`; with `keep_existing`, an existing id is left alone (and `None` returned) instead of
/// failing with [`StoreError::Conflict`].
pub(super) fn insert_run(
    conn: &Connection,
    run: &NewRun,
    now: Millis,
    keep_existing: bool,
    lease: Option<(&str, Millis)>,
) -> StoreResult<Option<Run>> {
    let status = if lease.is_some() {
        RunStatus::Running
    } else {
        RunStatus::Pending
    };
    let mut sql = Sql::new(
        "INSERT INTO runs (id, namespace, workflow, workflow_version, status, input, tags, \
         search_attributes, parent_run_id, root_run_id, nesting_depth, retry_of, continued_from, \
         created_at, updated_at, locked_by, locked_until, attempt, concurrency_key, \
         concurrency_limit, deadline_at, traceparent) VALUES (",
    );
    sql.bind(run.id.as_str().to_owned())
        .push(", ")
        .bind(run.namespace.as_str().to_owned())
        .push(", ")
        .bind(run.workflow.clone())
        .push(", ")
        .bind(i64::from(run.workflow_version))
        .push(", ")
        .bind(status.as_str().to_owned())
        .push(", ")
        .bind(to_json(&run.input))
        .push(", ")
        .bind(to_json(&run.tags))
        .push(", ")
        .bind(to_json(&run.search_attributes))
        .push(", ")
        .bind(run.parent_run_id.as_ref().map(|id| id.as_str().to_owned()))
        .push(", ")
        .bind(run.root_run_id.as_str().to_owned())
        .push(", ")
        .bind(i64::from(run.nesting_depth))
        .push(", ")
        .bind(run.retry_of.as_ref().map(|id| id.as_str().to_owned()))
        .push(", ")
        .bind(run.continued_from.as_ref().map(|id| id.as_str().to_owned()))
        .push(", ")
        .bind(now)
        .push(", ")
        .bind(now)
        .push(", ")
        .bind(lease.map(|(owner, _)| owner.to_owned()))
        .push(", ")
        .bind(lease.map(|(_, until)| until))
        .push(", ")
        .bind(i64::from(lease.is_some()))
        .push(", ")
        .bind(run.concurrency.as_ref().map(|c| c.key.clone()))
        .push(", ")
        .bind(run.concurrency.as_ref().map(|c| i64::from(c.limit)))
        .push(", ")
        .bind(run.deadline_at)
        .push(", ")
        .bind(run.traceparent.clone())
        .push(")");
    if keep_existing {
        sql.push(" ON CONFLICT (id) DO NOTHING");
    }
    sql.push(&format!(" RETURNING {RUN_COLS}"));
    let inserted = sql.one(conn, run_from_row).map_err(|e| match e {
        StoreError::Conflict(_) => id_taken(&run.id),
        other => other,
    })?;
    if inserted.is_some() {
        index_tags_and_attributes(conn, run, now)?;
    }
    Ok(inserted)
}

/// Writes the run's tags and search attributes as rows of `run_tags` and `run_attributes`,
/// which list filters use as indexes.
fn index_tags_and_attributes(conn: &Connection, run: &NewRun, now: Millis) -> StoreResult<()> {
    if !run.tags.is_empty() {
        let mut stmt = conn
            .prepare_cached(
                "INSERT INTO run_tags (run_id, namespace, tag, created_at) VALUES (?, ?, ?, ?) \
                 ON CONFLICT DO NOTHING",
            )
            .map_err(db)?;
        for tag in &run.tags {
            stmt.execute(rusqlite::params![
                run.id.as_str(),
                run.namespace.as_str(),
                tag,
                now
            ])
            .map_err(db)?;
        }
    }
    if !run.search_attributes.is_empty() {
        let mut stmt = conn
            .prepare_cached(
                "INSERT INTO run_attributes (run_id, namespace, key, value, created_at) \
                 VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            )
            .map_err(db)?;
        for (key, value) in &run.search_attributes {
            stmt.execute(rusqlite::params![
                run.id.as_str(),
                run.namespace.as_str(),
                key,
                value.to_string(),
                now
            ])
            .map_err(db)?;
        }
    }
    Ok(())
}

/// One run by id, whatever its namespace (for writes that already checked visibility).
pub(super) fn run_by_id(conn: &Connection, id: &RunId) -> StoreResult<Option<Run>> {
    let mut sql = Sql::new(format!("SELECT {RUN_COLS} FROM runs WHERE id = "));
    sql.bind(id.as_str().to_owned());
    sql.one(conn, run_from_row)
}
