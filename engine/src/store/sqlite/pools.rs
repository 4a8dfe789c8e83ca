//! Pools, and the definitions version their edits bump (in the same write).

use std::collections::BTreeMap;

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};

use super::SqliteStore;
use super::rows::{from_json, to_json};
use super::sql::db;
use super::writer::Wrote;
use crate::model::{Millis, Namespace, Pool, PoolName, RoutingRules};
use crate::store::rules::pools::{as_stored, granted_name, room_for_one_more};
use crate::store::{PoolPut, Pools, StoreError, StoreResult};

/// Bumps `tenant`'s definitions version; the version after it.
pub(super) fn bump(conn: &Connection, tenant: &str) -> StoreResult<u64> {
    let version: i64 = conn
        .prepare_cached(
            "INSERT INTO definition_versions (namespace, version) VALUES (?, 1) \
             ON CONFLICT (namespace) DO UPDATE SET version = version + 1 RETURNING version",
        )
        .map_err(db)?
        .query_row([tenant], |r| r.get(0))
        .map_err(db)?;
    Ok(version.max(0) as u64)
}

#[async_trait]
impl Pools for SqliteStore {
    async fn put_pool(&self, pool: &Pool, max_per_tenant: usize) -> StoreResult<PoolPut> {
        let pool = pool.clone();
        self.writer
            .write(move |conn| {
                let ns = pool.tenant.as_str();
                let existing: Option<i64> = conn
                    .prepare_cached("SELECT created_at FROM pools WHERE namespace = ? AND name = ?")
                    .map_err(db)?
                    .query_row(params![ns, pool.name.as_str()], |r| r.get(0))
                    .optional()
                    .map_err(db)?;
                if existing.is_none() {
                    let granted: bool = conn
                        .prepare_cached(
                            "SELECT EXISTS (SELECT 1 FROM pool_grants \
                             WHERE namespace = ? AND pool = ?)",
                        )
                        .map_err(db)?
                        .query_row(params![ns, pool.name.as_str()], |r| r.get(0))
                        .map_err(db)?;
                    if granted {
                        return Err(granted_name(pool.name.as_str()));
                    }
                    let held: i64 = conn
                        .prepare_cached("SELECT count(*) FROM pools WHERE namespace = ?")
                        .map_err(db)?
                        .query_row([ns], |r| r.get(0))
                        .map_err(db)?;
                    room_for_one_more(held, max_per_tenant, "pools", "max_pools")?;
                }
                let stored = as_stored(&pool, existing);
                conn.prepare_cached(
                    "INSERT INTO pools (namespace, name, labels, created_at, updated_at) \
                     VALUES (?, ?, ?, ?, ?) ON CONFLICT (namespace, name) DO UPDATE \
                     SET labels = excluded.labels, updated_at = excluded.updated_at",
                )
                .map_err(db)?
                .execute(params![
                    ns,
                    stored.name.as_str(),
                    to_json(&stored.labels),
                    stored.created_at,
                    stored.updated_at
                ])
                .map_err(db)?;
                let version = bump(conn, ns)?;
                Ok(Wrote::Keep(PoolPut {
                    pool: stored,
                    created: existing.is_none(),
                    version,
                }))
            })
            .await
    }

    async fn pools(&self, tenant: &Namespace) -> StoreResult<Vec<Pool>> {
        let tenant = tenant.clone();
        self.readers
            .read(move |conn| {
                let mut stmt = conn
                    .prepare_cached(
                        "SELECT name, labels, created_at, updated_at FROM pools \
                         WHERE namespace = ? ORDER BY name",
                    )
                    .map_err(db)?;
                let mut rows = stmt.query([tenant.as_str()]).map_err(db)?;
                let mut pools = Vec::new();
                while let Some(row) = rows.next().map_err(db)? {
                    let name: String = row.get(0).map_err(db)?;
                    let labels: String = row.get(1).map_err(db)?;
                    pools.push(Pool {
                        tenant: tenant.clone(),
                        name: PoolName::parse(&name)
                            .map_err(|e| StoreError::Corrupt(e.to_string()))?,
                        labels: from_json::<BTreeMap<String, String>>(&labels, "pool labels")?,
                        created_at: row.get(2).map_err(db)?,
                        updated_at: row.get(3).map_err(db)?,
                        shared: false,
                    });
                }
                Ok(pools)
            })
            .await
    }

    async fn delete_pool(&self, tenant: &Namespace, name: &PoolName) -> StoreResult<Option<u64>> {
        let (ns, name) = (tenant.as_str().to_owned(), name.as_str().to_owned());
        self.writer
            .write(move |conn| {
                let gone = conn
                    .prepare_cached("DELETE FROM pools WHERE namespace = ? AND name = ?")
                    .map_err(db)?
                    .execute(params![ns, name])
                    .map_err(db)?;
                if gone == 0 {
                    return Ok(Wrote::Keep(None));
                }
                Ok(Wrote::Keep(Some(bump(conn, &ns)?)))
            })
            .await
    }

    async fn definitions_version(&self, tenant: &Namespace) -> StoreResult<u64> {
        let ns = tenant.as_str().to_owned();
        self.readers
            .read(move |conn| {
                let version: Option<i64> = conn
                    .prepare_cached("SELECT version FROM definition_versions WHERE namespace = ?")
                    .map_err(db)?
                    .query_row([ns], |r| r.get(0))
                    .optional()
                    .map_err(db)?;
                Ok(version.unwrap_or(0).max(0) as u64)
            })
            .await
    }

    async fn put_routing_rules(
        &self,
        tenant: &Namespace,
        rules: &RoutingRules,
        now: Millis,
    ) -> StoreResult<u64> {
        let (ns, doc) = (tenant.as_str().to_owned(), to_json(rules));
        self.writer
            .write(move |conn| {
                conn.prepare_cached(
                    "INSERT INTO routing_rules (namespace, rules, updated_at) VALUES (?, ?, ?) \
                     ON CONFLICT (namespace) DO UPDATE \
                     SET rules = excluded.rules, updated_at = excluded.updated_at",
                )
                .map_err(db)?
                .execute(params![ns, doc, now])
                .map_err(db)?;
                Ok(Wrote::Keep(bump(conn, &ns)?))
            })
            .await
    }

    async fn steps_out(&self, tenant: &Namespace) -> StoreResult<Vec<(String, u64)>> {
        let ns = tenant.as_str().to_owned();
        self.readers
            .read(move |conn| {
                let mut stmt = conn
                    .prepare_cached(
                        "SELECT c.worker_group, count(*) FROM checkpoints c \
                         JOIN runs r ON r.id = c.run_id \
                         WHERE c.status = 'pending' AND c.kind = 'remote_step' \
                         AND c.worker_group IS NOT NULL AND r.namespace = ? \
                         GROUP BY c.worker_group ORDER BY c.worker_group",
                    )
                    .map_err(db)?;
                let rows = stmt
                    .query_map([ns], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))
                    .map_err(db)?;
                rows.map(|r| r.map(|(g, n)| (g, n.max(0) as u64)).map_err(db))
                    .collect()
            })
            .await
    }

    async fn routing_rules(&self, tenant: &Namespace) -> StoreResult<Option<RoutingRules>> {
        let ns = tenant.as_str().to_owned();
        self.readers
            .read(move |conn| {
                let doc: Option<String> = conn
                    .prepare_cached("SELECT rules FROM routing_rules WHERE namespace = ?")
                    .map_err(db)?
                    .query_row([ns], |r| r.get(0))
                    .optional()
                    .map_err(db)?;
                doc.map(|doc| from_json(&doc, "routing rules")).transpose()
            })
            .await
    }
}
