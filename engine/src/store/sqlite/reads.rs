//! Reads, each on a reader connection and confined to a [`Scope`]. A list's filters and the
//! counts' aggregation are `rules::filters`' and `rules::reads`'; these are their statements.

use async_trait::async_trait;
use rusqlite::Connection;
use serde_json::Value;

use super::SqliteStore;
use super::rows::{
    CHECKPOINT_COLS, RUN_COLS, checkpoint_from_row, col, from_json, run_from_row, run_id,
};
use super::sql::Sql;
use crate::model::{
    ActivityMinute, BufferedSignal, Checkpoint, Cursor, Facets, MAX_FACET_VALUES, Millis,
    Namespace, NamespaceLoad, Run, RunCount, RunId, RunPage, RunQuery, RunTotals, Scope,
    StatusCount, ValueCount,
};
use crate::store::columns::qualified;
use crate::store::rules::filters::{Filter, List};
use crate::store::rules::reads;
use crate::store::{History, LostDispatch, PendingStep, RunReads, SlotOut, StoreResult};

pub(super) fn get_run(conn: &Connection, scope: &Scope, id: &RunId) -> StoreResult<Option<Run>> {
    let mut sql = Sql::new(format!("SELECT {RUN_COLS} FROM runs WHERE id = "));
    sql.bind(id.as_str().to_owned()).scope("namespace", scope);
    sql.one(conn, run_from_row)
}

pub(super) fn list_runs(
    conn: &Connection,
    scope: &Scope,
    query: &RunQuery,
) -> StoreResult<RunPage> {
    let list = List::of(query);
    // What drives the scan, newest first: the tag's (or attribute's) index rows when the list
    // is filtered on one, so a rare value is found without walking every run; else the runs.
    let drive = list
        .filters
        .iter()
        .position(|f| matches!(f, Filter::Tag(_) | Filter::Attribute(_)));
    let mut sql = Sql::new(format!("SELECT {} FROM ", qualified_run_cols()));
    let (created, id, namespace) = match drive.map(|k| &list.filters[k]) {
        Some(Filter::Tag(tag)) => {
            sql.push("run_tags d JOIN runs ON runs.id = d.run_id WHERE d.tag = ")
                .bind(tag.to_string());
            ("d.created_at", "d.run_id", "d.namespace")
        }
        Some(Filter::Attribute(filter)) => {
            sql.push("run_attributes d JOIN runs ON runs.id = d.run_id WHERE d.key = ")
                .bind(filter.key.clone())
                .push(" AND d.value = ")
                .bind(filter.value.to_string());
            ("d.created_at", "d.run_id", "d.namespace")
        }
        _ => {
            sql.push("runs WHERE 1 = 1");
            ("runs.created_at", "runs.id", "runs.namespace")
        }
    };
    sql.scope(namespace, scope);
    for (k, filter) in list.filters.iter().enumerate() {
        if Some(k) == drive {
            continue;
        }
        match filter {
            Filter::Status(status) => {
                sql.push(" AND runs.status = ")
                    .bind(status.as_str().to_owned());
            }
            Filter::Workflow(workflow) => {
                sql.push(" AND runs.workflow = ").bind(workflow.to_string());
            }
            // A second tag or attribute filter, when the first drives the scan.
            Filter::Tag(tag) => {
                sql.push(
                    " AND EXISTS (SELECT 1 FROM run_tags t WHERE t.run_id = runs.id AND t.tag = ",
                )
                .bind(tag.to_string())
                .push(")");
            }
            Filter::Attribute(filter) => {
                sql.push(
                    " AND EXISTS (SELECT 1 FROM run_attributes a WHERE a.run_id = runs.id AND a.key = ",
                )
                .bind(filter.key.clone())
                .push(" AND a.value = ")
                .bind(filter.value.to_string())
                .push(")");
            }
            Filter::Family(family) => {
                sql.push(" AND (runs.id = ")
                    .bind(family.as_str().to_owned())
                    .push(" OR runs.root_run_id = ")
                    .bind(family.as_str().to_owned())
                    .push(")");
            }
            Filter::CreatedFrom(from) => {
                sql.push(&format!(" AND {created} >= ")).bind(*from);
            }
            Filter::CreatedUntil(until) => {
                sql.push(&format!(" AND {created} < ")).bind(*until);
            }
            Filter::After(Cursor {
                created_at,
                id: after,
            }) => {
                sql.push(&format!(" AND ({created} < "))
                    .bind(*created_at)
                    .push(&format!(" OR ({created} = "))
                    .bind(*created_at)
                    .push(&format!(" AND {id} < "))
                    .bind(after.as_str().to_owned())
                    .push("))");
            }
        }
    }
    sql.push(&format!(" ORDER BY {created} DESC, {id} DESC LIMIT "))
        .bind(list.fetch());
    Ok(list.page(sql.all(conn, run_from_row)?))
}

pub(super) fn count_by_status(conn: &Connection, scope: &Scope) -> StoreResult<Vec<StatusCount>> {
    let mut sql = Sql::new("SELECT status, SUM(n) AS n FROM run_counts WHERE 1 = 1");
    sql.scope("namespace", scope).push(" GROUP BY status");
    let rows = sql.all(conn, |row| Ok((col(row, "status")?, col(row, "n")?)))?;
    reads::status_counts(rows)
}

pub(super) fn run_counts(conn: &Connection, scope: &Scope) -> StoreResult<Vec<RunCount>> {
    reads::run_counts(four_columns(conn, scope, "run_counts", "status")?)
}

pub(super) fn run_totals(conn: &Connection, scope: &Scope) -> StoreResult<Vec<RunTotals>> {
    reads::run_totals(four_columns(conn, scope, "run_totals", "event")?)
}

/// `(namespace, workflow, <key>, n)` from table `counts` in `scope`.
fn four_columns(
    conn: &Connection,
    scope: &Scope,
    counts: &str,
    key: &str,
) -> StoreResult<Vec<(String, String, String, i64)>> {
    let mut sql = Sql::new(format!(
        "SELECT namespace, workflow, {key} AS k, n FROM {counts} WHERE n <> 0"
    ));
    sql.scope("namespace", scope);
    sql.all(conn, |row| {
        Ok((
            col(row, "namespace")?,
            col(row, "workflow")?,
            col(row, "k")?,
            col(row, "n")?,
        ))
    })
}

pub(super) fn namespace_loads(
    conn: &Connection,
    scope: &Scope,
    failed_since: Millis,
) -> StoreResult<Vec<NamespaceLoad>> {
    // Live statuses from the counts, recent failures by (status, finished_at); finished
    // history is never walked.
    let load = |row: &rusqlite::Row<'_>| {
        Ok((
            col::<Option<String>>(row, "ns")?,
            col::<String>(row, "status")?,
            col::<i64>(row, "n")? as u64,
        ))
    };
    let mut sql = Sql::new(
        "SELECT namespace AS ns, status, SUM(n) AS n FROM run_counts \
         WHERE status IN ('pending', 'running', 'cancelling', 'suspended', 'blocked')",
    );
    sql.scope("namespace", scope)
        .push(" GROUP BY namespace, status");
    let live = sql.all(conn, load)?;
    let mut sql = Sql::new(
        "SELECT namespace AS ns, 'failed' AS status, COUNT(*) AS n FROM runs \
         WHERE status IN ('failed', 'dead') AND finished_at >= ",
    );
    sql.bind(failed_since)
        .scope("namespace", scope)
        .push(" GROUP BY namespace");
    let failed = sql.all(conn, load)?;
    Ok(reads::namespace_loads(live.into_iter().chain(failed)))
}

/// [`RUN_COLS`] qualified with `runs.`, for queries that join another table.
fn qualified_run_cols() -> &'static str {
    static COLS: std::sync::LazyLock<String> =
        std::sync::LazyLock::new(|| qualified(RUN_COLS, "runs"));
    &COLS
}

/// The JSON path of search attribute `key` (quoted, so dots and dashes are part of the name).
fn attribute_path(key: &str) -> String {
    format!("$.\"{}\"", key.replace('"', ""))
}

pub(super) fn facets(conn: &Connection, scope: &Scope) -> StoreResult<Facets> {
    let count = |row: &rusqlite::Row<'_>| -> StoreResult<ValueCount> {
        Ok(ValueCount {
            value: Value::String(col(row, "v")?),
            count: col::<i64>(row, "n")? as u64,
        })
    };
    let mut sql = Sql::new("SELECT workflow AS v, SUM(n) AS n FROM run_counts WHERE 1 = 1");
    sql.scope("namespace", scope)
        .push(" GROUP BY workflow ORDER BY n DESC, v LIMIT ")
        .bind(MAX_FACET_VALUES as i64);
    let workflows = sql.all(conn, count)?;
    let mut sql = Sql::new("SELECT tag AS v, SUM(n) AS n FROM tag_counts WHERE 1 = 1");
    sql.scope("namespace", scope)
        .push(" GROUP BY tag ORDER BY n DESC, v LIMIT ")
        .bind(MAX_FACET_VALUES as i64);
    let tags = sql.all(conn, count)?;
    Ok(Facets {
        statuses: count_by_status(conn, scope)?,
        workflows,
        tags,
    })
}

pub(super) fn value_facets(
    conn: &Connection,
    scope: &Scope,
    key: &str,
) -> StoreResult<Vec<ValueCount>> {
    let mut sql = Sql::new("SELECT search_attributes -> ");
    sql.bind(attribute_path(key))
        .push(" AS v, COUNT(*) AS n FROM runs WHERE search_attributes -> ")
        .bind(attribute_path(key))
        .push(" IS NOT NULL")
        .scope("namespace", scope)
        .push(" GROUP BY v ORDER BY n DESC, v LIMIT ")
        .bind(MAX_FACET_VALUES as i64);
    sql.all(conn, |row| {
        Ok(ValueCount {
            value: from_json(&col::<String>(row, "v")?, "search attribute")?,
            count: col::<i64>(row, "n")? as u64,
        })
    })
}

pub(super) fn checkpoints(
    conn: &Connection,
    scope: &Scope,
    id: &RunId,
) -> StoreResult<Vec<Checkpoint>> {
    let mut sql = Sql::new(format!(
        "SELECT {CHECKPOINT_COLS} FROM checkpoints WHERE run_id = (SELECT id FROM runs WHERE id = "
    ));
    sql.bind(id.as_str().to_owned())
        .scope("namespace", scope)
        .push(") ORDER BY seq");
    sql.all(conn, checkpoint_from_row)
}

pub(super) fn pending_remote_steps(
    conn: &Connection,
    scope: &Scope,
    lost: &LostDispatch,
    limit: u32,
) -> StoreResult<Vec<PendingStep>> {
    let mut sql = Sql::new("");
    reads::pending_remote_steps(&mut sql, scope, lost, limit);
    sql.all(conn, |row| {
        let ns: Option<String> = col(row, "run_namespace")?;
        Ok(PendingStep {
            namespace: Namespace::from_stored(ns.as_deref()),
            checkpoint: checkpoint_from_row(row)?,
        })
    })
}

pub(super) fn slots_out(conn: &Connection, scope: &Scope, limit: u32) -> StoreResult<Vec<SlotOut>> {
    let mut sql = Sql::new(reads::SLOTS_OUT);
    sql.scope("r.namespace", scope)
        .push(" LIMIT ")
        .bind(i64::from(limit));
    sql.all(conn, |row| {
        let ns: Option<String> = col(row, "run_namespace")?;
        Ok(SlotOut {
            namespace: Namespace::from_stored(ns.as_deref()),
            run_id: run_id(col(row, "run_id")?)?,
            seq: col::<i64>(row, "seq")? as u32,
            slot: col(row, "slot")?,
        })
    })
}

pub(super) fn next_wake_at(conn: &Connection, scope: &Scope) -> StoreResult<Option<Millis>> {
    let mut sql = Sql::new(
        "SELECT MIN(CASE WHEN status = 'suspended' THEN wake_at ELSE locked_until END) AS due FROM runs \
         WHERE ((status = 'suspended' AND wake_at IS NOT NULL) OR status = 'running')",
    );
    sql.scope("namespace", scope);
    Ok(sql
        .one(conn, |row| col::<Option<Millis>>(row, "due"))?
        .flatten())
}

/// What run `id`'s next turn replays (unscoped: the caller's write already checked the run).
pub(super) fn history(conn: &Connection, id: &RunId) -> StoreResult<History> {
    let mut sql = Sql::new(format!(
        "SELECT {CHECKPOINT_COLS} FROM checkpoints WHERE run_id = "
    ));
    sql.bind(id.as_str().to_owned()).push(" ORDER BY seq");
    Ok(History {
        checkpoints: sql.all(conn, checkpoint_from_row)?,
        signals: buffered_signals(conn, id)?,
    })
}

pub(super) fn buffered_signals(conn: &Connection, id: &RunId) -> StoreResult<Vec<BufferedSignal>> {
    let mut sql = Sql::new("SELECT id, name, payload FROM signals WHERE run_id = ");
    sql.bind(id.as_str().to_owned())
        .push(" AND consumed_seq IS NULL ORDER BY id");
    sql.all(conn, |row| {
        Ok(BufferedSignal {
            id: col(row, "id")?,
            name: col(row, "name")?,
            payload: from_json(&col::<String>(row, "payload")?, "signal payload")?,
        })
    })
}

#[async_trait]
impl RunReads for SqliteStore {
    async fn get_run(&self, scope: &Scope, id: &RunId) -> StoreResult<Option<Run>> {
        let (scope, id) = (scope.clone(), id.clone());
        self.readers
            .read(move |conn| get_run(conn, &scope, &id))
            .await
    }

    async fn list_runs(&self, scope: &Scope, query: &RunQuery) -> StoreResult<RunPage> {
        let (scope, query) = (scope.clone(), query.clone());
        self.readers
            .read(move |conn| list_runs(conn, &scope, &query))
            .await
    }

    async fn count_by_status(&self, scope: &Scope) -> StoreResult<Vec<StatusCount>> {
        let scope = scope.clone();
        self.readers
            .read(move |conn| count_by_status(conn, &scope))
            .await
    }

    async fn run_counts(&self, scope: &Scope) -> StoreResult<Vec<RunCount>> {
        let scope = scope.clone();
        self.readers
            .read(move |conn| run_counts(conn, &scope))
            .await
    }

    async fn run_totals(&self, scope: &Scope) -> StoreResult<Vec<RunTotals>> {
        let scope = scope.clone();
        self.readers
            .read(move |conn| run_totals(conn, &scope))
            .await
    }

    async fn namespace_loads(
        &self,
        scope: &Scope,
        failed_since: Millis,
    ) -> StoreResult<Vec<NamespaceLoad>> {
        let scope = scope.clone();
        self.readers
            .read(move |conn| namespace_loads(conn, &scope, failed_since))
            .await
    }

    async fn facets(&self, scope: &Scope) -> StoreResult<Facets> {
        let scope = scope.clone();
        self.readers.read(move |conn| facets(conn, &scope)).await
    }

    async fn value_facets(&self, scope: &Scope, key: &str) -> StoreResult<Vec<ValueCount>> {
        let (scope, key) = (scope.clone(), key.to_owned());
        self.readers
            .read(move |conn| value_facets(conn, &scope, &key))
            .await
    }

    async fn checkpoints(&self, scope: &Scope, id: &RunId) -> StoreResult<Vec<Checkpoint>> {
        let (scope, id) = (scope.clone(), id.clone());
        self.readers
            .read(move |conn| checkpoints(conn, &scope, &id))
            .await
    }

    async fn activity(&self, scope: &Scope, since_minute: i64) -> StoreResult<Vec<ActivityMinute>> {
        let scope = scope.clone();
        self.readers
            .read(move |conn| super::activity::activity(conn, &scope, since_minute))
            .await
    }
}
