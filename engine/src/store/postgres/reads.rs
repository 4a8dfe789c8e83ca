//! Reads, each confined to a [`Scope`]. A list's filters and the counts' aggregation are
//! `rules::filters`' and `rules::reads`'; these are their statements.

use async_trait::async_trait;
use serde_json::{Value, json};
use sqlx::{PgConnection, PgPool, Row};

use super::PgStore;
use super::rows::{CHECKPOINT_COLS, RUN_COLS, checkpoint_from_row, db, run_from_row};
use super::sql::{Sql, push_scope};
use crate::model::{
    ActivityMinute, BufferedSignal, Checkpoint, Cursor, Facets, MAX_FACET_VALUES, Millis,
    Namespace, NamespaceLoad, Run, RunCount, RunId, RunPage, RunQuery, RunTotals, Scope,
    StatusCount, ValueCount,
};
use crate::store::rules::filters::{Filter, List};
use crate::store::rules::reads;
use crate::store::{
    History, LostDispatch, PendingStep, RunReads, SlotOut, StoreError, StoreResult,
};

pub(super) async fn get_run(pool: &PgPool, scope: &Scope, id: &RunId) -> StoreResult<Option<Run>> {
    let mut sql = Sql::new(format!("SELECT {RUN_COLS} FROM runs WHERE id = "));
    sql.push_bind(id.as_str().to_owned());
    push_scope(&mut sql, "namespace", scope);
    let row = sql.build().fetch_optional(pool).await.map_err(db)?;
    row.as_ref().map(run_from_row).transpose()
}

pub(super) async fn list_runs(
    pool: &PgPool,
    scope: &Scope,
    query: &RunQuery,
) -> StoreResult<RunPage> {
    let list = List::of(query);
    let mut sql = Sql::new(format!("SELECT {RUN_COLS} FROM runs WHERE TRUE"));
    push_scope(&mut sql, "namespace", scope);
    for filter in &list.filters {
        match filter {
            Filter::Status(status) => {
                sql.push(" AND status = ").push_bind(status.as_str());
            }
            Filter::Workflow(workflow) => {
                sql.push(" AND workflow = ").push_bind(workflow.to_string());
            }
            // Containment, which the GIN indexes on tags and search attributes serve. Those
            // indexes hold only runs that have some (see migration 0004), so the filter names
            // that predicate too; containment implies it.
            Filter::Tag(tag) => {
                sql.push(" AND tags <> '[]'::jsonb AND tags @> ")
                    .push_bind(json!([tag]));
            }
            Filter::Attribute(filter) => {
                let mut wanted = serde_json::Map::new();
                wanted.insert(filter.key.clone(), filter.value.clone());
                sql.push(" AND search_attributes <> '{}'::jsonb AND search_attributes @> ")
                    .push_bind(Value::Object(wanted));
            }
            Filter::Family(family) => {
                sql.push(" AND (id = ")
                    .push_bind(family.as_str().to_owned())
                    .push(" OR (root_run_id <> id AND root_run_id = ")
                    .push_bind(family.as_str().to_owned())
                    .push("))");
            }
            Filter::CreatedFrom(from) => {
                sql.push(" AND created_at >= ").push_bind(*from);
            }
            Filter::CreatedUntil(until) => {
                sql.push(" AND created_at < ").push_bind(*until);
            }
            Filter::After(Cursor { created_at, id }) => {
                sql.push(" AND (created_at, id) < (")
                    .push_bind(*created_at)
                    .push(", ")
                    .push_bind(id.as_str().to_owned())
                    .push(")");
            }
        }
    }
    sql.push(" ORDER BY created_at DESC, id DESC LIMIT ")
        .push_bind(list.fetch());
    // Planned for these values every time: a cached generic plan cannot tell a rare tag from a
    // common one and picks the tag index even where the namespace + workflow index is 20x
    // faster (measured with the lists benchmark).
    let rows = sql
        .build()
        .persistent(false)
        .fetch_all(pool)
        .await
        .map_err(db)?;
    let runs = rows
        .iter()
        .map(run_from_row)
        .collect::<StoreResult<Vec<_>>>()?;
    Ok(list.page(runs))
}

/// Runs by namespace, workflow and status: the folded totals and the deltas not yet folded,
/// read in one snapshot (see `migrations/postgres/0018_run_counts.sql`).
const RUN_COUNTS: &str = "(SELECT namespace, workflow, status, n FROM run_counts \
    UNION ALL SELECT namespace, workflow, status, n FROM run_count_deltas) c";

/// Runs started and finished by namespace and workflow, as [`RUN_COUNTS`].
const RUN_TOTALS: &str = "(SELECT namespace, workflow, event, n FROM run_totals \
    UNION ALL SELECT namespace, workflow, event, n FROM run_total_deltas) c";

/// Runs by namespace and tag, as [`RUN_COUNTS`].
const TAG_COUNTS: &str = "(SELECT namespace, tag, n FROM tag_counts \
    UNION ALL SELECT namespace, tag, n FROM tag_count_deltas) c";

pub(super) async fn count_by_status(pool: &PgPool, scope: &Scope) -> StoreResult<Vec<StatusCount>> {
    let mut sql = Sql::new(format!(
        "SELECT status, SUM(n)::BIGINT AS n FROM {RUN_COUNTS} WHERE TRUE"
    ));
    push_scope(&mut sql, "namespace", scope);
    sql.push(" GROUP BY status HAVING SUM(n) <> 0");
    let rows = sql.build().fetch_all(pool).await.map_err(db)?;
    let corrupt = |e: sqlx::Error| StoreError::Corrupt(e.to_string());
    let rows = rows
        .iter()
        .map(|row| {
            Ok((
                row.try_get(0).map_err(corrupt)?,
                row.try_get(1).map_err(corrupt)?,
            ))
        })
        .collect::<StoreResult<Vec<_>>>()?;
    reads::status_counts(rows)
}

pub(super) async fn run_counts(pool: &PgPool, scope: &Scope) -> StoreResult<Vec<RunCount>> {
    reads::run_counts(four_columns(pool, scope, RUN_COUNTS, "status").await?)
}

pub(super) async fn run_totals(pool: &PgPool, scope: &Scope) -> StoreResult<Vec<RunTotals>> {
    reads::run_totals(four_columns(pool, scope, RUN_TOTALS, "event").await?)
}

/// `(namespace, workflow, <key>, n)` summed from `counts` in `scope`, leaving out zeros.
async fn four_columns(
    pool: &PgPool,
    scope: &Scope,
    counts: &str,
    key: &str,
) -> StoreResult<Vec<(String, String, String, i64)>> {
    let mut sql = Sql::new(format!(
        "SELECT namespace, workflow, {key}, SUM(n)::BIGINT AS n FROM {counts} WHERE TRUE"
    ));
    push_scope(&mut sql, "namespace", scope);
    sql.push(format!(
        " GROUP BY namespace, workflow, {key} HAVING SUM(n) <> 0"
    ));
    let rows = sql.build().fetch_all(pool).await.map_err(db)?;
    let corrupt = |e: sqlx::Error| StoreError::Corrupt(e.to_string());
    rows.iter()
        .map(|row| {
            Ok((
                row.try_get(0).map_err(corrupt)?,
                row.try_get(1).map_err(corrupt)?,
                row.try_get(2).map_err(corrupt)?,
                row.try_get(3).map_err(corrupt)?,
            ))
        })
        .collect()
}

/// Folds the count deltas into their totals; another process folding now makes it a no-op.
pub(super) async fn fold_counts(pool: &PgPool) -> StoreResult<()> {
    sqlx::query("SELECT fold_run_counts()")
        .execute(pool)
        .await
        .map_err(db)?;
    Ok(())
}

pub(super) async fn namespace_loads(
    pool: &PgPool,
    scope: &Scope,
    failed_since: Millis,
) -> StoreResult<Vec<NamespaceLoad>> {
    // Live statuses from the counts, recent failures by (status, finished_at); finished
    // history is never walked.
    let mut sql = Sql::new(format!(
        "SELECT namespace, status, SUM(n)::BIGINT AS n FROM {RUN_COUNTS} \
         WHERE status IN ('pending', 'running', 'cancelling', 'suspended', 'blocked')"
    ));
    push_scope(&mut sql, "namespace", scope);
    sql.push(
        " GROUP BY namespace, status HAVING SUM(n) <> 0 UNION ALL \
        SELECT namespace, 'failed', COUNT(*) FROM runs \
        WHERE status IN ('failed', 'dead') AND finished_at >= ",
    )
    .push_bind(failed_since);
    push_scope(&mut sql, "namespace", scope);
    sql.push(" GROUP BY namespace");
    let rows = sql.build().fetch_all(pool).await.map_err(db)?;
    let corrupt = |e: sqlx::Error| StoreError::Corrupt(e.to_string());
    let rows = rows
        .iter()
        .map(|row| {
            let n: i64 = row.try_get(2).map_err(corrupt)?;
            Ok((
                row.try_get(0).map_err(corrupt)?,
                row.try_get(1).map_err(corrupt)?,
                n as u64,
            ))
        })
        .collect::<StoreResult<Vec<_>>>()?;
    Ok(reads::namespace_loads(rows))
}

pub(super) async fn facets(pool: &PgPool, scope: &Scope) -> StoreResult<Facets> {
    let mut sql = Sql::new(format!(
        "SELECT workflow, SUM(n)::BIGINT AS n FROM {RUN_COUNTS} WHERE TRUE"
    ));
    push_scope(&mut sql, "namespace", scope);
    sql.push(" GROUP BY workflow HAVING SUM(n) <> 0 ORDER BY n DESC, workflow LIMIT ")
        .push_bind(MAX_FACET_VALUES as i64);
    let workflows = value_counts(
        sql.build().fetch_all(pool).await.map_err(db)?,
        Value::String,
    )?;
    let mut sql = Sql::new(format!(
        "SELECT tag, SUM(n)::BIGINT AS n FROM {TAG_COUNTS} WHERE TRUE"
    ));
    push_scope(&mut sql, "namespace", scope);
    sql.push(" GROUP BY tag HAVING SUM(n) <> 0 ORDER BY n DESC, tag LIMIT ")
        .push_bind(MAX_FACET_VALUES as i64);
    let tags = value_counts(
        sql.build().fetch_all(pool).await.map_err(db)?,
        Value::String,
    )?;
    Ok(Facets {
        statuses: count_by_status(pool, scope).await?,
        workflows,
        tags,
    })
}

pub(super) async fn value_facets(
    pool: &PgPool,
    scope: &Scope,
    key: &str,
) -> StoreResult<Vec<ValueCount>> {
    let mut sql = Sql::new("SELECT search_attributes -> ");
    sql.push_bind(key.to_owned());
    sql.push(" AS v, COUNT(*) AS n FROM runs WHERE jsonb_exists(search_attributes, ");
    sql.push_bind(key.to_owned());
    sql.push(")");
    push_scope(&mut sql, "namespace", scope);
    sql.push(" GROUP BY v ORDER BY n DESC, v LIMIT ")
        .push_bind(MAX_FACET_VALUES as i64);
    value_counts::<Value>(sql.build().fetch_all(pool).await.map_err(db)?, |v| v)
}

/// `(value, count)` rows as [`ValueCount`]s.
fn value_counts<T>(
    rows: Vec<sqlx::postgres::PgRow>,
    to_json: impl Fn(T) -> Value,
) -> StoreResult<Vec<ValueCount>>
where
    T: for<'r> sqlx::Decode<'r, sqlx::Postgres> + sqlx::Type<sqlx::Postgres>,
{
    let corrupt = |e: sqlx::Error| StoreError::Corrupt(e.to_string());
    rows.iter()
        .map(|row| {
            Ok(ValueCount {
                value: to_json(row.try_get::<T, _>(0).map_err(corrupt)?),
                count: row.try_get::<i64, _>(1).map_err(corrupt)? as u64,
            })
        })
        .collect()
}

pub(super) async fn checkpoints(
    pool: &PgPool,
    scope: &Scope,
    id: &RunId,
) -> StoreResult<Vec<Checkpoint>> {
    let mut sql = Sql::new(format!(
        "SELECT {CHECKPOINT_COLS} FROM checkpoints WHERE run_id = (SELECT id FROM runs WHERE id = "
    ));
    sql.push_bind(id.as_str().to_owned());
    push_scope(&mut sql, "namespace", scope);
    sql.push(") ORDER BY seq");
    let rows = sql.build().fetch_all(pool).await.map_err(db)?;
    rows.iter().map(checkpoint_from_row).collect()
}

pub(super) async fn slots_out(
    pool: &PgPool,
    scope: &Scope,
    limit: u32,
) -> StoreResult<Vec<SlotOut>> {
    let mut sql = Sql::new(reads::SLOTS_OUT.to_owned());
    push_scope(&mut sql, "r.namespace", scope);
    sql.push(" LIMIT ").push_bind(i64::from(limit));
    let rows = sql.build().fetch_all(pool).await.map_err(db)?;
    rows.iter()
        .map(|row| {
            let corrupt = |e: sqlx::Error| StoreError::Corrupt(format!("a slot held: {e}"));
            let ns: Option<String> = row.try_get("run_namespace").map_err(corrupt)?;
            let id: String = row.try_get("run_id").map_err(corrupt)?;
            Ok(SlotOut {
                namespace: Namespace::from_stored(ns.as_deref()),
                run_id: RunId::parse(&id).map_err(|e| StoreError::Corrupt(e.to_string()))?,
                seq: row.try_get::<i32, _>("seq").map_err(corrupt)? as u32,
                slot: row.try_get("slot").map_err(corrupt)?,
            })
        })
        .collect()
}

pub(super) async fn pending_remote_steps(
    pool: &PgPool,
    scope: &Scope,
    lost: &LostDispatch,
    limit: u32,
) -> StoreResult<Vec<PendingStep>> {
    let mut sql = Sql::new("");
    reads::pending_remote_steps(&mut sql, scope, lost, limit);
    let rows = sql.build().fetch_all(pool).await.map_err(db)?;
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

pub(super) async fn next_wake_at(pool: &PgPool, scope: &Scope) -> StoreResult<Option<Millis>> {
    let mut sql = Sql::new(
        "SELECT MIN(CASE WHEN status = 'suspended' THEN wake_at ELSE locked_until END) FROM runs \
         WHERE ((status = 'suspended' AND wake_at IS NOT NULL) OR status = 'running')",
    );
    push_scope(&mut sql, "namespace", scope);
    let row = sql.build().fetch_one(pool).await.map_err(db)?;
    row.try_get(0)
        .map_err(|e| StoreError::Corrupt(e.to_string()))
}

/// Run `id`'s buffered, unconsumed signals in delivery order.
pub(super) async fn buffered_signals<'e, E>(
    executor: E,
    id: &RunId,
) -> StoreResult<Vec<BufferedSignal>>
where
    E: sqlx::PgExecutor<'e>,
{
    let rows: Vec<(i64, String, serde_json::Value)> = sqlx::query_as(
        "SELECT id, name, payload FROM signals WHERE run_id = $1 AND consumed_seq IS NULL ORDER BY id",
    )
    .bind(id.as_str())
    .fetch_all(executor)
    .await
    .map_err(db)?;
    Ok(rows
        .into_iter()
        .map(|(id, name, payload)| BufferedSignal { id, name, payload })
        .collect())
}

/// What run `id`'s next turn replays (unscoped: the caller's write already checked the run).
/// One round trip: the buffered signals ride along as a JSON column of every row (one row of
/// NULL checkpoint columns when there are no checkpoints yet).
pub(super) async fn history(conn: &mut PgConnection, id: &RunId) -> StoreResult<History> {
    let rows = sqlx::query(&format!(
        "WITH s AS (SELECT COALESCE(json_agg(json_build_object('id', id, 'name', name, \
         'payload', payload) ORDER BY id), '[]'::json) AS buffered FROM signals \
         WHERE run_id = $1 AND consumed_seq IS NULL) \
         SELECT {CHECKPOINT_COLS}, s.buffered FROM s \
         LEFT JOIN checkpoints ON checkpoints.run_id = $1 ORDER BY seq"
    ))
    .bind(id.as_str())
    .fetch_all(&mut *conn)
    .await
    .map_err(db)?;
    let signals = match rows.first() {
        Some(row) => {
            let buffered: sqlx::types::Json<Vec<BufferedSignal>> = row
                .try_get("buffered")
                .map_err(|e| StoreError::Corrupt(format!("buffered signals: {e}")))?;
            buffered.0
        }
        None => Vec::new(),
    };
    let mut checkpoints = Vec::with_capacity(rows.len());
    for row in &rows {
        let run_id: Option<String> = row
            .try_get(0)
            .map_err(|e| StoreError::Corrupt(format!("checkpoint run id: {e}")))?;
        if run_id.is_some() {
            checkpoints.push(checkpoint_from_row(row)?);
        }
    }
    Ok(History {
        checkpoints,
        signals,
    })
}

#[async_trait]
impl RunReads for PgStore {
    async fn get_run(&self, scope: &Scope, id: &RunId) -> StoreResult<Option<Run>> {
        get_run(&self.pool, scope, id).await
    }

    async fn list_runs(&self, scope: &Scope, query: &RunQuery) -> StoreResult<RunPage> {
        list_runs(&self.pool, scope, query).await
    }

    async fn count_by_status(&self, scope: &Scope) -> StoreResult<Vec<StatusCount>> {
        count_by_status(&self.pool, scope).await
    }

    async fn run_counts(&self, scope: &Scope) -> StoreResult<Vec<RunCount>> {
        run_counts(&self.pool, scope).await
    }

    async fn run_totals(&self, scope: &Scope) -> StoreResult<Vec<RunTotals>> {
        run_totals(&self.pool, scope).await
    }

    async fn namespace_loads(
        &self,
        scope: &Scope,
        failed_since: Millis,
    ) -> StoreResult<Vec<NamespaceLoad>> {
        namespace_loads(&self.pool, scope, failed_since).await
    }

    async fn facets(&self, scope: &Scope) -> StoreResult<Facets> {
        facets(&self.pool, scope).await
    }

    async fn value_facets(&self, scope: &Scope, key: &str) -> StoreResult<Vec<ValueCount>> {
        value_facets(&self.pool, scope, key).await
    }

    async fn checkpoints(&self, scope: &Scope, id: &RunId) -> StoreResult<Vec<Checkpoint>> {
        checkpoints(&self.pool, scope, id).await
    }

    async fn activity(&self, scope: &Scope, since_minute: i64) -> StoreResult<Vec<ActivityMinute>> {
        super::activity::activity(&self.pool, scope, since_minute).await
    }
}
