//! Shared pools and their grants; a grant or a revocation bumps the tenant's definitions
//! version in the same write.

use std::collections::{BTreeMap, BTreeSet};

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};

use super::SqliteStore;
use super::pools::bump;
use super::rows::{from_json, to_json};
use super::sql::db;
use super::writer::Wrote;
use crate::model::{Millis, Namespace, PoolName, SharedPool};
use crate::store::{Grant, SharedPoolDeleted, SharedPools, StoreError, StoreResult};

fn corrupt(e: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(e.to_string())
}

/// The shared pools `filter` selects (`WHERE …` over `shared_pools p`, one `?` for `arg`),
/// with their grants (only `arg`'s, when the filter is by tenant).
fn read_pools(conn: &Connection, filter: &str, arg: Option<&str>) -> StoreResult<Vec<SharedPool>> {
    let mut stmt = conn
        .prepare_cached(&format!(
            "SELECT p.name, p.labels, p.created_at, p.updated_at, g.namespace \
             FROM shared_pools p LEFT JOIN pool_grants g ON g.pool = p.name {filter} \
             ORDER BY p.name, g.namespace"
        ))
        .map_err(db)?;
    let mut rows = match arg {
        Some(arg) => stmt.query([arg]),
        None => stmt.query([]),
    }
    .map_err(db)?;
    let mut pools: Vec<SharedPool> = Vec::new();
    while let Some(row) = rows.next().map_err(db)? {
        let name: String = row.get(0).map_err(db)?;
        let grant: Option<String> = row.get(4).map_err(db)?;
        if pools.last().is_none_or(|p| p.name.as_str() != name) {
            let labels: String = row.get(1).map_err(db)?;
            pools.push(SharedPool {
                name: PoolName::parse(&name).map_err(corrupt)?,
                labels: from_json::<BTreeMap<String, String>>(&labels, "pool labels")?,
                grants: BTreeSet::new(),
                created_at: row.get(2).map_err(db)?,
                updated_at: row.get(3).map_err(db)?,
            });
        }
        if let (Some(grant), Some(pool)) = (grant, pools.last_mut()) {
            pool.grants
                .insert(Namespace::parse(&grant).map_err(corrupt)?);
        }
    }
    Ok(pools)
}

#[async_trait]
impl SharedPools for SqliteStore {
    async fn put_shared_pool(&self, pool: &SharedPool) -> StoreResult<bool> {
        let pool = pool.clone();
        self.writer
            .write(move |conn| {
                let existed: Option<i64> = conn
                    .prepare_cached("SELECT created_at FROM shared_pools WHERE name = ?")
                    .map_err(db)?
                    .query_row([pool.name.as_str()], |r| r.get(0))
                    .optional()
                    .map_err(db)?;
                conn.prepare_cached(
                    "INSERT INTO shared_pools (name, labels, created_at, updated_at) \
                     VALUES (?, ?, ?, ?) ON CONFLICT (name) DO UPDATE \
                     SET labels = excluded.labels, updated_at = excluded.updated_at",
                )
                .map_err(db)?
                .execute(params![
                    pool.name.as_str(),
                    to_json(&pool.labels),
                    pool.created_at,
                    pool.updated_at
                ])
                .map_err(db)?;
                Ok(Wrote::Keep(existed.is_none()))
            })
            .await
    }

    async fn shared_pools(&self) -> StoreResult<Vec<SharedPool>> {
        self.readers.read(|conn| read_pools(conn, "", None)).await
    }

    async fn delete_shared_pool(&self, name: &PoolName) -> StoreResult<SharedPoolDeleted> {
        let name = name.as_str().to_owned();
        self.writer
            .write(move |conn| {
                let mut stmt = conn
                    .prepare_cached(
                        "SELECT namespace FROM pool_grants WHERE pool = ? ORDER BY namespace",
                    )
                    .map_err(db)?;
                let granted = stmt
                    .query_map([&name], |r| r.get::<_, String>(0))
                    .map_err(db)?
                    .map(|t| {
                        t.map_err(db)
                            .and_then(|t| Namespace::parse(&t).map_err(corrupt))
                    })
                    .collect::<StoreResult<Vec<_>>>()?;
                if !granted.is_empty() {
                    return Ok(Wrote::Keep(SharedPoolDeleted::Granted(granted)));
                }
                let gone = conn
                    .prepare_cached("DELETE FROM shared_pools WHERE name = ?")
                    .map_err(db)?
                    .execute([&name])
                    .map_err(db)?;
                Ok(Wrote::Keep(if gone == 0 {
                    SharedPoolDeleted::Missing
                } else {
                    SharedPoolDeleted::Deleted
                }))
            })
            .await
    }

    async fn grant_pool(
        &self,
        name: &PoolName,
        tenant: &Namespace,
        now: Millis,
    ) -> StoreResult<Grant> {
        let (name, ns) = (name.as_str().to_owned(), tenant.as_str().to_owned());
        self.writer
            .write(move |conn| {
                let exists: bool = conn
                    .prepare_cached("SELECT EXISTS (SELECT 1 FROM shared_pools WHERE name = ?)")
                    .map_err(db)?
                    .query_row([&name], |r| r.get(0))
                    .map_err(db)?;
                if !exists {
                    return Ok(Wrote::Keep(Grant::NoSuchPool));
                }
                let own: bool = conn
                    .prepare_cached(
                        "SELECT EXISTS (SELECT 1 FROM pools WHERE namespace = ? AND name = ?)",
                    )
                    .map_err(db)?
                    .query_row(params![ns, name], |r| r.get(0))
                    .map_err(db)?;
                if own {
                    return Ok(Wrote::Keep(Grant::OwnPool));
                }
                conn.prepare_cached(
                    "INSERT INTO pool_grants (pool, namespace, granted_at) VALUES (?, ?, ?) \
                     ON CONFLICT (pool, namespace) DO NOTHING",
                )
                .map_err(db)?
                .execute(params![name, ns, now])
                .map_err(db)?;
                Ok(Wrote::Keep(Grant::Granted {
                    version: bump(conn, &ns)?,
                }))
            })
            .await
    }

    async fn revoke_pool(&self, name: &PoolName, tenant: &Namespace) -> StoreResult<Option<u64>> {
        let (name, ns) = (name.as_str().to_owned(), tenant.as_str().to_owned());
        self.writer
            .write(move |conn| {
                let gone = conn
                    .prepare_cached("DELETE FROM pool_grants WHERE pool = ? AND namespace = ?")
                    .map_err(db)?
                    .execute(params![name, ns])
                    .map_err(db)?;
                if gone == 0 {
                    return Ok(Wrote::Keep(None));
                }
                Ok(Wrote::Keep(Some(bump(conn, &ns)?)))
            })
            .await
    }

    async fn granted_pools(&self, tenant: &Namespace) -> StoreResult<Vec<SharedPool>> {
        let ns = tenant.as_str().to_owned();
        self.readers
            .read(move |conn| read_pools(conn, "WHERE g.namespace = ?", Some(&ns)))
            .await
    }
}
