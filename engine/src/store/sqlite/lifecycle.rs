//! Run lifecycle writes other than turns and results: claims, leases, sweeps, dispatch beats,
//! control verbs and signals. Each runs inside the writer's transaction. The rules of the verbs
//! and the sweep are `rules::lifecycle`'s; these are their statements.

use std::collections::HashMap;

use rusqlite::{Connection, params};
use serde_json::Value;

use super::plans::stored_plans;
use super::rows::{RUN_COLS, col, from_json, run_from_row, run_id, to_json};
use super::sql::Sql;
use super::sql::count;
use super::sql::db;
use super::writer::{Wrote, at_once};
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

pub(super) fn claim_runs(conn: &Connection, req: &ClaimRequest) -> StoreResult<Wrote<Vec<Run>>> {
    // The single writer makes the count and the claim one step: no other claim runs between.
    let mut only = req.only.clone();
    if let Some(ids) = &mut only {
        for (tenant, ceiling) in ceilings_in_force(conn, ids)? {
            let started = count(conn, STARTED_SQL, [tenant.as_str()])?;
            let mut sql = Sql::new("SELECT id FROM runs WHERE namespace = ");
            sql.bind(tenant.as_str().to_owned())
                .push(concat!(
                    " AND ",
                    fresh_run!(),
                    " AND status = 'pending' AND id IN ("
                ))
                .bind_list(ids.iter().map(|id| id.as_str().to_owned()))
                .push(") ORDER BY created_at, id");
            let fresh = sql.all(conn, |row| run_id(row.get::<_, String>(0).map_err(db)?))?;
            let held = over_ceiling(fresh, started, ceiling);
            ids.retain(|id| !held.contains(id));
        }
        let held = held_by_keys(conn, ids)?;
        ids.retain(|id| !held.contains(id));
        if ids.is_empty() {
            return Ok(Wrote::Keep(Vec::new()));
        }
    }
    let mut sql = Sql::new("");
    rules::lifecycle::claim(&mut sql, req, only.as_deref());
    Ok(Wrote::Keep(sql.all(conn, run_from_row)?))
}

/// The concurrency ceilings in force, as stored, for the tenants with fresh runs among `ids`.
fn ceilings_in_force(conn: &Connection, ids: &[RunId]) -> StoreResult<Vec<(Namespace, u32)>> {
    let mut sql = Sql::new(FRESH_TENANTS_SQL);
    sql.push("IN (")
        .bind_list(ids.iter().map(|id| id.as_str().to_owned()))
        .push(")");
    let tenants = sql.all(conn, |row| row.get::<_, String>(0).map_err(db))?;
    if tenants.is_empty() {
        return Ok(Vec::new());
    }
    Ok(ceilings_of(tenants, stored_plans(conn)?))
}

/// Of `ids`, the fresh runs to leave waiting because their workflow concurrency key is at its
/// limit (see [`over_key_limits`]).
fn held_by_keys(conn: &Connection, ids: &[RunId]) -> StoreResult<Vec<RunId>> {
    let mut sql = Sql::new(KEYED_FRESH_SQL);
    sql.push("IN (")
        .bind_list(ids.iter().map(|id| id.as_str().to_owned()))
        .push(") ORDER BY created_at, id");
    let fresh = sql.all(conn, |row| {
        Ok(KeyedFresh {
            id: run_id(row.get::<_, String>(0).map_err(db)?)?,
            counter: (
                row.get(1).map_err(db)?,
                row.get(2).map_err(db)?,
                row.get(3).map_err(db)?,
            ),
            limit: u32::try_from(row.get::<_, i64>(4).map_err(db)?).unwrap_or(1),
        })
    })?;
    if fresh.is_empty() {
        return Ok(Vec::new());
    }
    let mut started = HashMap::new();
    for run in &fresh {
        if !started.contains_key(&run.counter) {
            let (tenant, workflow, key) = &run.counter;
            let n = count(conn, KEY_STARTED_SQL, [tenant, workflow, key])?;
            started.insert(run.counter.clone(), n);
        }
    }
    Ok(over_key_limits(fresh, &started))
}

/// [`crate::store::Store::runnable_runs`]: each run's rank within its workflow, then within
/// its tenant by that rank, so a tenant's firsts are one per workflow in turn.
pub(super) fn runnable_runs(
    conn: &Connection,
    scope: &Scope,
    now: Millis,
    per_tenant: u32,
    limit: u32,
    max_recoveries: u32,
) -> StoreResult<Vec<Runnable>> {
    let mut sql = Sql::new("");
    rules::lifecycle::runnable_ranked(&mut sql, scope, now, per_tenant, limit, max_recoveries);
    sql.all(conn, |row| {
        Ok(Runnable {
            id: run_id(row.get::<_, String>(0).map_err(db)?)?,
            namespace: Namespace::from_stored(
                row.get::<_, Option<String>>(1).map_err(db)?.as_deref(),
            ),
            workflow: row.get(2).map_err(db)?,
            concurrency_key: row.get(3).map_err(db)?,
            due: row.get(4).map_err(db)?,
            fresh: row.get(5).map_err(db)?,
        })
    })
}

pub(super) fn renew_leases(
    conn: &Connection,
    owner: &str,
    ids: &[RunId],
    until: Millis,
) -> StoreResult<Wrote<u64>> {
    let mut sql = Sql::new("UPDATE runs SET locked_until = ");
    sql.bind(until)
        .push(" WHERE status = 'running' AND locked_by = ")
        .bind(owner.to_owned())
        .push(" AND id IN (")
        .bind_list(ids.iter().map(|id| id.as_str().to_owned()))
        .push(")");
    Ok(Wrote::Keep(sql.execute(conn)?))
}

/// [`crate::store::Store::beat_driver`]: how many other drivers are alive at `now`.
pub(super) fn beat_driver(
    conn: &Connection,
    owner: &str,
    alive_until: Millis,
    now: Millis,
) -> StoreResult<Wrote<u32>> {
    // Absence means gone, so rows of drivers long gone can go.
    conn.prepare_cached("DELETE FROM drivers WHERE alive_until < ? AND owner <> ?")
        .map_err(db)?
        .execute(params![alive_until - 86_400_000, owner])
        .map_err(db)?;
    conn.prepare_cached(
        "INSERT INTO drivers (owner, alive_until) VALUES (?, ?) \
         ON CONFLICT (owner) DO UPDATE SET alive_until = excluded.alive_until",
    )
    .map_err(db)?
    .execute(params![owner, alive_until])
    .map_err(db)?;
    let peers = conn
        .prepare_cached("SELECT count(*) FROM drivers WHERE owner <> ? AND alive_until >= ?")
        .map_err(db)?
        .query_row(params![owner, now], |row| row.get::<_, u32>(0))
        .map_err(db)?;
    Ok(Wrote::Keep(peers))
}

pub(super) fn release_leases(
    conn: &Connection,
    owner: &str,
    now: Millis,
) -> StoreResult<Wrote<u64>> {
    let released = conn
        .prepare_cached(
            "UPDATE runs SET status = 'pending', locked_by = NULL, locked_until = NULL, updated_at = ? \
             WHERE status = 'running' AND locked_by = ?",
        )
        .map_err(db)?
        .execute(params![now, owner])
        .map_err(db)?;
    Ok(Wrote::Keep(released as u64))
}

pub(super) fn sweep_abandoned(
    conn: &mut Connection,
    scope: &Scope,
    max_recoveries: u32,
    now: Millis,
) -> StoreResult<Wrote<Vec<Run>>> {
    let ended = at_once(lifecycle::sweep_abandoned(conn, scope, max_recoveries, now))?;
    Ok(Wrote::Keep(ended))
}

pub(super) fn wake_blocked(
    conn: &Connection,
    scope: &Scope,
    now: Millis,
) -> StoreResult<Wrote<Vec<Run>>> {
    let mut sql = Sql::new("UPDATE runs SET status = 'pending', wake_at = NULL, updated_at = ");
    sql.bind(now)
        .push(" WHERE status = 'blocked' AND wake_at <= ")
        .bind(now)
        .scope("namespace", scope);
    sql.push(&format!(" RETURNING {RUN_COLS}"));
    let woken = sql.all(conn, run_from_row)?;
    Ok(if woken.is_empty() {
        Wrote::Discard(woken)
    } else {
        Wrote::Keep(woken)
    })
}

pub(super) fn unblock_runs(
    conn: &Connection,
    scope: &Scope,
    served: &[(String, u32)],
    now: Millis,
) -> StoreResult<Wrote<Vec<Run>>> {
    if served.is_empty() {
        return Ok(Wrote::Discard(Vec::new()));
    }
    let mut sql = Sql::new("UPDATE runs SET status = 'pending', error = NULL, updated_at = ");
    sql.bind(now)
        .push(" WHERE status = 'blocked' AND wake_at IS NULL")
        .scope("namespace", scope)
        .push(" AND (");
    for (i, (workflow, version)) in served.iter().enumerate() {
        if i > 0 {
            sql.push(" OR ");
        }
        sql.push("(workflow = ")
            .bind(workflow.clone())
            .push(" AND workflow_version = ")
            .bind(i64::from(*version))
            .push(")");
    }
    sql.push(&format!(") RETURNING {RUN_COLS}"));
    Ok(Wrote::Keep(sql.all(conn, run_from_row)?))
}

/// [`crate::store::Store::beat_step`] inside the writer's transaction.
pub(super) fn beat_step(
    conn: &Connection,
    scope: &Scope,
    id: &RunId,
    seq: u32,
    group: &str,
    now: Millis,
) -> StoreResult<Wrote<bool>> {
    let mut sql = Sql::new("UPDATE checkpoints SET enqueued_at = ");
    sql.bind(now)
        .push(" WHERE run_id = ")
        .bind(id.as_str().to_owned())
        .push(" AND seq = ")
        .bind(i64::from(seq))
        .push(" AND kind = 'remote_step' AND status = 'pending' AND worker_group = ")
        .bind(group.to_owned())
        .push(" AND run_id IN (SELECT id FROM runs WHERE id = ")
        .bind(id.as_str().to_owned())
        .scope("namespace", scope)
        .push(")");
    Ok(Wrote::Keep(sql.execute(conn)? > 0))
}

pub(super) fn mark_dispatched(
    conn: &Connection,
    id: &RunId,
    seq: u32,
    by: &str,
    now: Millis,
) -> StoreResult<Wrote<()>> {
    conn.prepare_cached(
        "UPDATE checkpoints SET enqueued_at = ?, dispatched_by = ? \
         WHERE run_id = ? AND seq = ? AND status = 'pending'",
    )
    .map_err(db)?
    .execute(params![now, by, id.as_str(), i64::from(seq)])
    .map_err(db)?;
    Ok(Wrote::Keep(()))
}

pub(super) fn update_run_if(
    conn: &mut Connection,
    scope: &Scope,
    id: &RunId,
    expected: &[RunStatus],
    patch: &RunPatch,
    now: Millis,
) -> StoreResult<Wrote<Option<Run>>> {
    let moved = at_once(lifecycle::update_run_if(
        conn, scope, id, expected, patch, now,
    ))?;
    Ok(Wrote::unless_none(moved))
}

pub(super) fn retry_run(
    conn: &Connection,
    scope: &Scope,
    id: &RunId,
    now: Millis,
) -> StoreResult<Wrote<Option<Run>>> {
    let mut sql = Sql::new(
        "UPDATE runs SET status = 'pending', admitted_attempt = attempt, error = NULL, deadline_at = NULL, \
         output = NULL, finished_at = NULL, wake_at = NULL, needs_wake = 0, recoveries = 0, \
         locked_by = NULL, locked_until = NULL, \
         updated_at = ",
    );
    sql.bind(now)
        .push(" WHERE id = ")
        .bind(id.as_str().to_owned())
        .scope("namespace", scope)
        .push(&format!(
            " AND status IN ('failed', 'dead') RETURNING {RUN_COLS}"
        ));
    let Some(run) = sql.one(conn, run_from_row)? else {
        return Ok(Wrote::Discard(None));
    };
    // Signals taken by the waits about to be dropped are buffered again: the run meets those
    // waits again on its way back.
    conn.prepare_cached(
        "UPDATE signals SET consumed_seq = NULL WHERE run_id = ?1 AND consumed_seq >= \
         (SELECT MIN(seq) FROM checkpoints WHERE run_id = ?1 AND status = 'failed')",
    )
    .map_err(db)?
    .execute([id.as_str()])
    .map_err(db)?;
    conn.prepare_cached(
        "DELETE FROM checkpoints WHERE run_id = ?1 AND seq >= \
         (SELECT MIN(seq) FROM checkpoints WHERE run_id = ?1 AND status = 'failed')",
    )
    .map_err(db)?
    .execute([id.as_str()])
    .map_err(db)?;
    Ok(Wrote::Keep(Some(run)))
}

pub(super) fn send_update(
    conn: &mut Connection,
    scope: &Scope,
    id: &RunId,
    update: &AcceptedUpdate,
    now: Millis,
) -> StoreResult<Wrote<UpdateSent>> {
    Ok(
        match at_once(lifecycle::send_update(conn, scope, id, update, now))? {
            sent @ UpdateSent::Delivered(_) => Wrote::Keep(sent),
            sent => Wrote::Discard(sent),
        },
    )
}

/// The update kept with run `id` (if `scope` sees it) under `update_id`.
pub(super) fn scoped_update(
    conn: &Connection,
    scope: &Scope,
    id: &RunId,
    update_id: &UpdateId,
) -> StoreResult<Option<StoredUpdate>> {
    let mut sql = Sql::new(
        "SELECT s.name, s.reply FROM signals s JOIN runs r ON r.id = s.run_id WHERE s.run_id = ",
    );
    sql.bind(id.as_str().to_owned())
        .push(" AND s.update_id = ")
        .bind(update_id.as_str().to_owned())
        .scope("r.namespace", scope);
    sql.one(conn, stored_update)
}

fn stored_update(row: &rusqlite::Row<'_>) -> StoreResult<StoredUpdate> {
    let reply: Option<String> = col(row, "reply")?;
    Ok(StoredUpdate {
        name: col(row, "name")?,
        reply: match reply {
            Some(raw) => from_json(&raw, "an update's reply")?,
            None => Value::Null,
        },
    })
}

pub(super) fn send_signal(
    conn: &mut Connection,
    scope: &Scope,
    id: &RunId,
    name: &str,
    payload: &Value,
    now: Millis,
) -> StoreResult<Wrote<SignalSent>> {
    Ok(
        match at_once(lifecycle::send_signal(conn, scope, id, name, payload, now))? {
            sent @ SignalSent::Delivered(_) => Wrote::Keep(sent),
            sent => Wrote::Discard(sent),
        },
    )
}

impl LifecycleStatements for Connection {
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
        sql.bind(patch.status.as_str().to_owned())
            .push(", updated_at = ")
            .bind(now)
            .push(", finished_at = COALESCE(finished_at, ")
            .bind(finished_at)
            .push(")");
        if let Some(error) = &patch.error {
            sql.push(", error = ").bind(to_json(error));
        }
        if patch.status.is_terminal() {
            sql.push(", locked_by = NULL, locked_until = NULL, wake_at = NULL");
        }
        sql.push(" WHERE id = ")
            .bind(id.as_str().to_owned())
            .scope("namespace", scope)
            .push(" AND status IN (")
            .bind_list(expected.iter().map(|s| s.as_str().to_owned()))
            .push(&format!(") RETURNING {RUN_COLS}"));
        sql.one(self, run_from_row)
    }

    async fn run_to_signal(&mut self, scope: &Scope, id: &RunId) -> StoreResult<Option<Run>> {
        let mut sql = Sql::new(format!("SELECT {RUN_COLS} FROM runs WHERE id = "));
        sql.bind(id.as_str().to_owned()).scope("namespace", scope);
        sql.one(self, run_from_row)
    }

    async fn buffer_signal(
        &mut self,
        id: &RunId,
        name: &str,
        payload: &Value,
        update: Option<(&UpdateId, &Value)>,
        now: Millis,
    ) -> StoreResult<()> {
        self.prepare_cached(
            "INSERT INTO signals (run_id, name, payload, created_at, update_id, reply) \
             VALUES (?, ?, ?, ?, ?, ?)",
        )
        .map_err(db)?
        .execute(params![
            id.as_str(),
            name,
            to_json(payload),
            now,
            update.map(|(id, _)| id.as_str()),
            update.map(|(_, reply)| to_json(reply)),
        ])
        .map_err(db)?;
        Ok(())
    }

    async fn update_of(
        &mut self,
        id: &RunId,
        update_id: &UpdateId,
    ) -> StoreResult<Option<StoredUpdate>> {
        let mut sql = Sql::new("SELECT name, reply FROM signals WHERE run_id = ");
        sql.bind(id.as_str().to_owned())
            .push(" AND update_id = ")
            .bind(update_id.as_str().to_owned());
        sql.one(self, stored_update)
    }

    async fn bury_dead(
        &mut self,
        scope: &Scope,
        max_recoveries: u32,
        error: String,
        now: Millis,
    ) -> StoreResult<Vec<Run>> {
        let mut sql = Sql::new("UPDATE runs SET status = 'dead', error = ");
        sql.bind(error)
            .push(", finished_at = ")
            .bind(now)
            .push(", updated_at = ")
            .bind(now)
            .push(
                ", locked_by = NULL, locked_until = NULL, wake_at = NULL \
                 WHERE status = 'running' AND locked_until < ",
            )
            .bind(now)
            .push(" AND recoveries >= ")
            .bind(i64::from(max_recoveries))
            .scope("namespace", scope)
            .push(&format!(" RETURNING {RUN_COLS}"));
        sql.all(self, run_from_row)
    }

    async fn end_cancelling(&mut self, scope: &Scope, now: Millis) -> StoreResult<Vec<Run>> {
        let mut sql = Sql::new("UPDATE runs SET status = 'cancelled', finished_at = ");
        sql.bind(now)
            .push(", updated_at = ")
            .bind(now)
            .push(
                ", locked_by = NULL, locked_until = NULL, wake_at = NULL \
                 WHERE status = 'cancelling' AND (locked_until IS NULL OR locked_until < ",
            )
            .bind(now)
            .push(")")
            .scope("namespace", scope)
            .push(&format!(" RETURNING {RUN_COLS}"));
        sql.all(self, run_from_row)
    }
}
