//! Run lifecycle writes other than turns and results: claims, leases, sweeps, dispatch beats,
//! control verbs and signals. Each runs inside one transaction. The rules of the verbs and the
//! sweep are `rules::lifecycle`'s; these are their statements.

use std::collections::HashMap;

use serde_json::Value;
use sqlx::{PgConnection, PgPool, Row};

use super::plans::stored_plans;
use super::rows::{RUN_COLS, db, run_from_row, run_id};
use super::sql::{Sql, push_scope};
use super::values::to_value;
use crate::model::{
    AcceptedUpdate, Millis, Namespace, Run, RunId, RunStatus, Scope, StoredUpdate, UpdateId,
};
use crate::store::rules;
use crate::store::rules::lifecycle::{
    self, ClaimRequest, KEY_STARTED_SQL, KEYED_FRESH_SQL, KeyedFresh, LifecycleStatements,
    over_ceiling, over_key_limits,
};
use crate::store::rules::plans::{FRESH_TENANTS_SQL, STARTED_SQL, ceilings_of, fresh_run};
use crate::store::{RunPatch, Runnable, SignalSent, StoreResult, UpdateSent};

/// Leases up to `limit` runnable runs. `FOR UPDATE SKIP LOCKED`: several control planes on one
/// database each take a disjoint set, and none waits for another's claim.
pub(super) async fn claim_runs(
    conn: &mut PgConnection,
    req: &ClaimRequest,
) -> StoreResult<Vec<Run>> {
    let mut only = req.only.clone();
    if let Some(ids) = &mut only {
        // One tenant's claims queue behind each other's count (in tenant order, so two
        // drivers never wait on each other in a circle); other tenants' do not.
        for (tenant, ceiling) in ceilings_in_force(conn, ids).await? {
            sqlx::query(
                "SELECT pg_advisory_xact_lock(hashtextextended('durable-ceiling:' || $1, 0))",
            )
            .bind(tenant.as_str())
            .execute(&mut *conn)
            .await
            .map_err(db)?;
            let started: i64 = sqlx::query_scalar(STARTED_SQL)
                .bind(tenant.as_str())
                .fetch_one(&mut *conn)
                .await
                .map_err(db)?;
            let among: Vec<String> = ids.iter().map(|id| id.as_str().to_owned()).collect();
            let fresh: Vec<String> = sqlx::query_scalar(concat!(
                "SELECT id FROM runs WHERE namespace = $1 AND ",
                fresh_run!(),
                " AND status = 'pending' AND id = ANY($2) ORDER BY created_at, id"
            ))
            .bind(tenant.as_str())
            .bind(&among)
            .fetch_all(&mut *conn)
            .await
            .map_err(db)?;
            let fresh = fresh.into_iter().map(run_id).collect::<StoreResult<_>>()?;
            let held = over_ceiling(fresh, started.max(0) as u64, ceiling);
            ids.retain(|id| !held.contains(id));
        }
        let held = held_by_keys(conn, ids).await?;
        ids.retain(|id| !held.contains(id));
        if ids.is_empty() {
            return Ok(Vec::new());
        }
    }
    let mut sql = Sql::new("");
    rules::lifecycle::claim(&mut sql, req, only.as_deref());
    let rows = sql.build().fetch_all(&mut *conn).await.map_err(db)?;
    rows.iter().map(run_from_row).collect()
}

/// The concurrency ceilings in force, as stored, for the tenants with fresh runs among `ids`,
/// in tenant order.
async fn ceilings_in_force(
    conn: &mut PgConnection,
    ids: &[RunId],
) -> StoreResult<Vec<(Namespace, u32)>> {
    let among: Vec<String> = ids.iter().map(|id| id.as_str().to_owned()).collect();
    let tenants: Vec<String> = sqlx::query_scalar(&format!("{FRESH_TENANTS_SQL}= ANY($1)"))
        .bind(&among)
        .fetch_all(&mut *conn)
        .await
        .map_err(db)?;
    if tenants.is_empty() {
        return Ok(Vec::new());
    }
    Ok(ceilings_of(tenants, stored_plans(&mut *conn).await?))
}

/// Of `ids`, the fresh runs to leave waiting because their workflow concurrency key is at its
/// limit (see [`over_key_limits`]). Each key's count is taken under a transaction-scoped lock
/// on that key, after any tenant locks and in key order, so two planes never both fill its last
/// place, and never wait on each other in a circle.
async fn held_by_keys(conn: &mut PgConnection, ids: &[RunId]) -> StoreResult<Vec<RunId>> {
    let among: Vec<String> = ids.iter().map(|id| id.as_str().to_owned()).collect();
    let rows = sqlx::query(&format!(
        "{KEYED_FRESH_SQL}= ANY($1) ORDER BY created_at, id"
    ))
    .bind(&among)
    .fetch_all(&mut *conn)
    .await
    .map_err(db)?;
    let mut fresh = Vec::with_capacity(rows.len());
    for row in &rows {
        fresh.push(KeyedFresh {
            id: run_id(row.try_get(0).map_err(db)?)?,
            counter: (
                row.try_get(1).map_err(db)?,
                row.try_get(2).map_err(db)?,
                row.try_get(3).map_err(db)?,
            ),
            limit: u32::try_from(row.try_get::<i32, _>(4).map_err(db)?).unwrap_or(1),
        });
    }
    let mut counters: Vec<&(String, String, String)> = fresh.iter().map(|r| &r.counter).collect();
    counters.sort();
    counters.dedup();
    let mut started = HashMap::new();
    for counter in counters {
        let (tenant, workflow, key) = counter;
        sqlx::query(
            "SELECT pg_advisory_xact_lock(hashtextextended('durable-key:' || $1 || '/' || $2 || '/' || $3, 0))",
        )
        .bind(tenant)
        .bind(workflow)
        .bind(key)
        .execute(&mut *conn)
        .await
        .map_err(db)?;
        let n: i64 = sqlx::query_scalar(KEY_STARTED_SQL)
            .bind(tenant)
            .bind(workflow)
            .bind(key)
            .fetch_one(&mut *conn)
            .await
            .map_err(db)?;
        started.insert(counter.clone(), n.max(0) as u64);
    }
    Ok(over_key_limits(fresh, &started))
}

/// [`crate::store::Store::runnable_runs`]: each run's rank within its workflow, then within
/// its tenant by that rank, so a tenant's firsts are one per workflow in turn.
pub(super) async fn runnable_runs(
    pool: &PgPool,
    scope: &Scope,
    now: Millis,
    per_tenant: u32,
    limit: u32,
    max_recoveries: u32,
) -> StoreResult<Vec<Runnable>> {
    let mut sql = Sql::new("");
    rules::lifecycle::runnable_ranked(&mut sql, scope, now, per_tenant, limit, max_recoveries);
    let rows = sql.build().fetch_all(pool).await.map_err(db)?;
    rows.iter()
        .map(|row| {
            Ok(Runnable {
                id: run_id(row.try_get::<String, _>(0).map_err(db)?)?,
                namespace: Namespace::from_stored(
                    row.try_get::<Option<String>, _>(1).map_err(db)?.as_deref(),
                ),
                workflow: row.try_get(2).map_err(db)?,
                concurrency_key: row.try_get(3).map_err(db)?,
                due: row.try_get(4).map_err(db)?,
                fresh: row.try_get(5).map_err(db)?,
            })
        })
        .collect()
}

pub(super) async fn renew_leases(
    pool: &PgPool,
    owner: &str,
    ids: &[RunId],
    until: Millis,
) -> StoreResult<u64> {
    let ids: Vec<&str> = ids.iter().map(RunId::as_str).collect();
    // Rows a commit holds right now are skipped, never waited for: waiting could close a
    // lock cycle with a group transaction, and that commit settles the lease anyway.
    let done = sqlx::query(
        "UPDATE runs SET locked_until = $1 WHERE id IN (SELECT id FROM runs \
         WHERE status = 'running' AND locked_by = $2 AND id = ANY($3) FOR UPDATE SKIP LOCKED)",
    )
    .bind(until)
    .bind(owner)
    .bind(&ids)
    .execute(pool)
    .await
    .map_err(db)?;
    Ok(done.rows_affected())
}

/// [`crate::store::Store::beat_driver`]: how many other drivers are alive at `now`.
pub(super) async fn beat_driver(
    pool: &PgPool,
    owner: &str,
    alive_until: Millis,
    now: Millis,
) -> StoreResult<u32> {
    // Absence means gone, so rows of drivers long gone can go. Every part of the statement
    // sees the table as it was before it, so the count never includes `owner`'s own row.
    let peers: i64 = sqlx::query_scalar(
        "WITH gone AS (DELETE FROM drivers WHERE alive_until < $2 - 86400000 AND owner <> $1), \
         peers AS (SELECT count(*) AS n FROM drivers WHERE owner <> $1 AND alive_until >= $3) \
         INSERT INTO drivers (owner, alive_until) VALUES ($1, $2) \
         ON CONFLICT (owner) DO UPDATE SET alive_until = EXCLUDED.alive_until \
         RETURNING (SELECT n FROM peers)",
    )
    .bind(owner)
    .bind(alive_until)
    .bind(now)
    .fetch_one(pool)
    .await
    .map_err(db)?;
    Ok(u32::try_from(peers).unwrap_or(u32::MAX))
}

pub(super) async fn release_leases(pool: &PgPool, owner: &str, now: Millis) -> StoreResult<u64> {
    let done = sqlx::query(
        "UPDATE runs SET status = 'pending', locked_by = NULL, locked_until = NULL, updated_at = $1 \
         WHERE status = 'running' AND locked_by = $2",
    )
    .bind(now)
    .bind(owner)
    .execute(pool)
    .await
    .map_err(db)?;
    Ok(done.rows_affected())
}

pub(super) async fn sweep_abandoned(
    conn: &mut PgConnection,
    scope: &Scope,
    max_recoveries: u32,
    now: Millis,
) -> StoreResult<Vec<Run>> {
    lifecycle::sweep_abandoned(conn, scope, max_recoveries, now).await
}

pub(super) async fn wake_blocked(
    conn: &mut PgConnection,
    scope: &Scope,
    now: Millis,
) -> StoreResult<Vec<Run>> {
    let mut sql = Sql::new("UPDATE runs SET status = 'pending', wake_at = NULL, updated_at = ");
    sql.push_bind(now);
    sql.push(" WHERE status = 'blocked' AND wake_at <= ")
        .push_bind(now);
    push_scope(&mut sql, "namespace", scope);
    sql.push(format!(" RETURNING {RUN_COLS}"));
    let rows = sql.build().fetch_all(&mut *conn).await.map_err(db)?;
    rows.iter().map(run_from_row).collect()
}

pub(super) async fn unblock_runs(
    conn: &mut PgConnection,
    scope: &Scope,
    served: &[(String, u32)],
    now: Millis,
) -> StoreResult<Vec<Run>> {
    if served.is_empty() {
        return Ok(Vec::new());
    }
    let mut sql = Sql::new("UPDATE runs SET status = 'pending', error = NULL, updated_at = ");
    sql.push_bind(now);
    sql.push(" WHERE status = 'blocked' AND wake_at IS NULL");
    push_scope(&mut sql, "namespace", scope);
    sql.push(" AND (");
    for (i, (workflow, version)) in served.iter().enumerate() {
        if i > 0 {
            sql.push(" OR ");
        }
        sql.push("(workflow = ").push_bind(workflow.clone());
        sql.push(" AND workflow_version = ")
            .push_bind(*version as i32);
        sql.push(")");
    }
    sql.push(format!(") RETURNING {RUN_COLS}"));
    let rows = sql.build().fetch_all(&mut *conn).await.map_err(db)?;
    rows.iter().map(run_from_row).collect()
}

/// [`crate::store::Store::beat_step`].
pub(super) async fn beat_step(
    pool: &PgPool,
    scope: &Scope,
    id: &RunId,
    seq: u32,
    group: &str,
    now: Millis,
) -> StoreResult<bool> {
    let mut sql = Sql::new("UPDATE checkpoints SET enqueued_at = ");
    sql.push_bind(now)
        .push(" WHERE run_id = ")
        .push_bind(id.as_str().to_owned())
        .push(" AND seq = ")
        .push_bind(seq as i32)
        .push(" AND kind = 'remote_step' AND status = 'pending' AND worker_group = ")
        .push_bind(group.to_owned())
        .push(" AND run_id IN (SELECT id FROM runs WHERE id = ")
        .push_bind(id.as_str().to_owned());
    push_scope(&mut sql, "namespace", scope);
    sql.push(")");
    let done = sql.build().execute(pool).await.map_err(db)?;
    Ok(done.rows_affected() > 0)
}

pub(super) async fn mark_dispatched(
    pool: &PgPool,
    id: &RunId,
    seq: u32,
    by: &str,
    now: Millis,
) -> StoreResult<()> {
    sqlx::query(
        "UPDATE checkpoints SET enqueued_at = $1, dispatched_by = $4 \
         WHERE run_id = $2 AND seq = $3 AND status = 'pending'",
    )
    .bind(now)
    .bind(id.as_str())
    .bind(seq as i32)
    .bind(by)
    .execute(pool)
    .await
    .map_err(db)?;
    Ok(())
}

pub(super) async fn update_run_if(
    conn: &mut PgConnection,
    scope: &Scope,
    id: &RunId,
    expected: &[RunStatus],
    patch: &RunPatch,
    now: Millis,
) -> StoreResult<Option<Run>> {
    lifecycle::update_run_if(conn, scope, id, expected, patch, now).await
}

pub(super) async fn retry_run(
    conn: &mut PgConnection,
    scope: &Scope,
    id: &RunId,
    now: Millis,
) -> StoreResult<Option<Run>> {
    let mut sql = Sql::new(
        "UPDATE runs SET status = 'pending', admitted_attempt = attempt, error = NULL, deadline_at = NULL, \
         output = NULL, finished_at = NULL, wake_at = NULL, needs_wake = FALSE, recoveries = 0, \
         locked_by = NULL, locked_until = NULL, \
         updated_at = ",
    );
    sql.push_bind(now);
    sql.push(" WHERE id = ").push_bind(id.as_str().to_owned());
    push_scope(&mut sql, "namespace", scope);
    sql.push(format!(
        " AND status IN ('failed', 'dead') RETURNING {RUN_COLS}"
    ));
    let Some(row) = sql.build().fetch_optional(&mut *conn).await.map_err(db)? else {
        return Ok(None);
    };
    // Signals taken by the waits about to be dropped are buffered again: the run meets those
    // waits again on its way back.
    sqlx::query(
        "UPDATE signals SET consumed_seq = NULL WHERE run_id = $1 AND consumed_seq >= \
         (SELECT MIN(seq) FROM checkpoints WHERE run_id = $1 AND status = 'failed')",
    )
    .bind(id.as_str())
    .execute(&mut *conn)
    .await
    .map_err(db)?;
    sqlx::query(
        "DELETE FROM checkpoints WHERE run_id = $1 AND seq >= \
         (SELECT MIN(seq) FROM checkpoints WHERE run_id = $1 AND status = 'failed')",
    )
    .bind(id.as_str())
    .execute(&mut *conn)
    .await
    .map_err(db)?;
    Ok(Some(run_from_row(&row)?))
}

pub(super) async fn send_update(
    conn: &mut PgConnection,
    scope: &Scope,
    id: &RunId,
    update: &AcceptedUpdate,
    now: Millis,
) -> StoreResult<UpdateSent> {
    lifecycle::send_update(conn, scope, id, update, now).await
}

/// The update kept with run `id` (if `scope` sees it) under `update_id`.
pub(super) async fn scoped_update(
    pool: &PgPool,
    scope: &Scope,
    id: &RunId,
    update_id: &UpdateId,
) -> StoreResult<Option<StoredUpdate>> {
    let mut sql = Sql::new(
        "SELECT s.name, s.reply FROM signals s JOIN runs r ON r.id = s.run_id WHERE s.run_id = ",
    );
    sql.push_bind(id.as_str().to_owned());
    sql.push(" AND s.update_id = ")
        .push_bind(update_id.as_str().to_owned());
    push_scope(&mut sql, "r.namespace", scope);
    stored_update(&mut sql, pool).await
}

async fn stored_update<'e>(
    sql: &mut Sql,
    executor: impl sqlx::PgExecutor<'e>,
) -> StoreResult<Option<StoredUpdate>> {
    let row = sql.build().fetch_optional(executor).await.map_err(db)?;
    row.map(|row| {
        Ok(StoredUpdate {
            name: row.try_get("name").map_err(db)?,
            reply: row
                .try_get::<Option<Value>, _>("reply")
                .map_err(db)?
                .unwrap_or(Value::Null),
        })
    })
    .transpose()
}

pub(super) async fn send_signal(
    conn: &mut PgConnection,
    scope: &Scope,
    id: &RunId,
    name: &str,
    payload: &Value,
    now: Millis,
) -> StoreResult<SignalSent> {
    lifecycle::send_signal(conn, scope, id, name, payload, now).await
}

impl LifecycleStatements for PgConnection {
    async fn update_status_if(
        &mut self,
        scope: &Scope,
        id: &RunId,
        expected: &[RunStatus],
        patch: &RunPatch,
        now: Millis,
    ) -> StoreResult<Option<Run>> {
        let finished_at = patch.status.is_terminal().then_some(now);
        let mut sql = Sql::new("UPDATE runs SET status = ");
        sql.push_bind(patch.status.as_str());
        sql.push(", updated_at = ").push_bind(now);
        sql.push(", finished_at = COALESCE(finished_at, ")
            .push_bind(finished_at)
            .push(")");
        if let Some(error) = &patch.error {
            sql.push(", error = ").push_bind(to_value(error));
        }
        if patch.status.is_terminal() {
            sql.push(", locked_by = NULL, locked_until = NULL, wake_at = NULL");
        }
        sql.push(" WHERE id = ").push_bind(id.as_str().to_owned());
        push_scope(&mut sql, "namespace", scope);
        sql.push(" AND status IN (");
        let mut list = sql.separated(", ");
        for status in expected {
            list.push_bind(status.as_str());
        }
        sql.push(format!(") RETURNING {RUN_COLS}"));
        let row = sql.build().fetch_optional(&mut *self).await.map_err(db)?;
        row.as_ref().map(run_from_row).transpose()
    }

    async fn run_to_signal(&mut self, scope: &Scope, id: &RunId) -> StoreResult<Option<Run>> {
        let mut sql = Sql::new(format!("SELECT {RUN_COLS} FROM runs WHERE id = "));
        sql.push_bind(id.as_str().to_owned());
        push_scope(&mut sql, "namespace", scope);
        sql.push(" FOR UPDATE");
        let row = sql.build().fetch_optional(&mut *self).await.map_err(db)?;
        row.as_ref().map(run_from_row).transpose()
    }

    async fn buffer_signal(
        &mut self,
        id: &RunId,
        name: &str,
        payload: &Value,
        update: Option<(&UpdateId, &Value)>,
        now: Millis,
    ) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO signals (run_id, name, payload, created_at, update_id, reply) \
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(id.as_str())
        .bind(name)
        .bind(payload)
        .bind(now)
        .bind(update.map(|(id, _)| id.as_str()))
        .bind(update.map(|(_, reply)| reply))
        .execute(&mut *self)
        .await
        .map_err(db)?;
        Ok(())
    }

    async fn update_of(
        &mut self,
        id: &RunId,
        update_id: &UpdateId,
    ) -> StoreResult<Option<StoredUpdate>> {
        let mut sql = Sql::new("SELECT name, reply FROM signals WHERE run_id = ");
        sql.push_bind(id.as_str().to_owned());
        sql.push(" AND update_id = ")
            .push_bind(update_id.as_str().to_owned());
        stored_update(&mut sql, &mut *self).await
    }

    async fn bury_dead(
        &mut self,
        scope: &Scope,
        max_recoveries: u32,
        error: Value,
        now: Millis,
    ) -> StoreResult<Vec<Run>> {
        let mut sql = Sql::new("UPDATE runs SET status = 'dead', error = ");
        sql.push_bind(error);
        sql.push(", finished_at = ").push_bind(now);
        sql.push(", updated_at = ").push_bind(now);
        sql.push(
            ", locked_by = NULL, locked_until = NULL, wake_at = NULL \
             WHERE status = 'running' AND locked_until < ",
        );
        sql.push_bind(now);
        sql.push(" AND recoveries >= ")
            .push_bind(max_recoveries as i32);
        push_scope(&mut sql, "namespace", scope);
        sql.push(format!(" RETURNING {RUN_COLS}"));
        let rows = sql.build().fetch_all(&mut *self).await.map_err(db)?;
        rows.iter().map(run_from_row).collect()
    }

    async fn end_cancelling(&mut self, scope: &Scope, now: Millis) -> StoreResult<Vec<Run>> {
        let mut sql = Sql::new("UPDATE runs SET status = 'cancelled', finished_at = ");
        sql.push_bind(now);
        sql.push(", updated_at = ").push_bind(now);
        sql.push(
            ", locked_by = NULL, locked_until = NULL, wake_at = NULL \
             WHERE status = 'cancelling' AND (locked_until IS NULL OR locked_until < ",
        );
        sql.push_bind(now);
        sql.push(")");
        push_scope(&mut sql, "namespace", scope);
        sql.push(format!(" RETURNING {RUN_COLS}"));
        let rows = sql.build().fetch_all(&mut *self).await.map_err(db)?;
        rows.iter().map(run_from_row).collect()
    }
}
