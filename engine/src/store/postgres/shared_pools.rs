//! Shared pools and their grants; a grant or a revocation bumps the tenant's definitions
//! version in the same transaction.

use std::collections::{BTreeMap, BTreeSet};

use async_trait::async_trait;
use sqlx::Row;
use sqlx::postgres::PgRow;
use sqlx::types::Json;

use super::PgStore;
use super::pools::{bump, corrupt};
use super::rows::db;
use crate::model::{Millis, Namespace, PoolName, SharedPool};
use crate::store::{Grant, SharedPoolDeleted, SharedPools, StoreResult};

const SELECT: &str = "SELECT p.name, p.labels, p.created_at, p.updated_at, g.namespace \
     FROM shared_pools p LEFT JOIN pool_grants g ON g.pool = p.name";

/// Folds `rows` (one per pool and grant, by name) into pools with their grants.
fn pools(rows: &[PgRow]) -> StoreResult<Vec<SharedPool>> {
    let mut pools: Vec<SharedPool> = Vec::new();
    for row in rows {
        let name: String = row.try_get(0).map_err(corrupt)?;
        if pools.last().is_none_or(|p| p.name.as_str() != name) {
            let labels: Json<BTreeMap<String, String>> = row.try_get(1).map_err(corrupt)?;
            pools.push(SharedPool {
                name: PoolName::parse(&name).map_err(corrupt)?,
                labels: labels.0,
                grants: BTreeSet::new(),
                created_at: row.try_get(2).map_err(corrupt)?,
                updated_at: row.try_get(3).map_err(corrupt)?,
            });
        }
        let grant: Option<String> = row.try_get(4).map_err(corrupt)?;
        if let (Some(grant), Some(pool)) = (grant, pools.last_mut()) {
            pool.grants
                .insert(Namespace::parse(&grant).map_err(corrupt)?);
        }
    }
    Ok(pools)
}

#[async_trait]
impl SharedPools for PgStore {
    async fn put_shared_pool(&self, pool: &SharedPool) -> StoreResult<bool> {
        let created: bool = sqlx::query_scalar(
            "INSERT INTO shared_pools (name, labels, created_at, updated_at) \
             VALUES ($1, $2, $3, $4) ON CONFLICT (name) DO UPDATE \
             SET labels = excluded.labels, updated_at = excluded.updated_at \
             RETURNING (xmax = 0)",
        )
        .bind(pool.name.as_str())
        .bind(Json(&pool.labels))
        .bind(pool.created_at)
        .bind(pool.updated_at)
        .fetch_one(&self.pool)
        .await
        .map_err(db)?;
        Ok(created)
    }

    async fn shared_pools(&self) -> StoreResult<Vec<SharedPool>> {
        let rows = sqlx::query(&format!("{SELECT} ORDER BY p.name, g.namespace"))
            .fetch_all(&self.pool)
            .await
            .map_err(db)?;
        pools(&rows)
    }

    async fn delete_shared_pool(&self, name: &PoolName) -> StoreResult<SharedPoolDeleted> {
        let mut tx = self.pool.begin().await.map_err(db)?;
        sqlx::query("SELECT 1 FROM shared_pools WHERE name = $1 FOR UPDATE")
            .bind(name.as_str())
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        let granted: Vec<String> = sqlx::query_scalar(
            "SELECT namespace FROM pool_grants WHERE pool = $1 ORDER BY namespace",
        )
        .bind(name.as_str())
        .fetch_all(&mut *tx)
        .await
        .map_err(db)?;
        if !granted.is_empty() {
            let tenants = granted
                .iter()
                .map(|t| Namespace::parse(t).map_err(corrupt))
                .collect::<StoreResult<Vec<_>>>()?;
            return Ok(SharedPoolDeleted::Granted(tenants));
        }
        let gone = sqlx::query("DELETE FROM shared_pools WHERE name = $1")
            .bind(name.as_str())
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        tx.commit().await.map_err(db)?;
        Ok(if gone.rows_affected() == 0 {
            SharedPoolDeleted::Missing
        } else {
            SharedPoolDeleted::Deleted
        })
    }

    async fn grant_pool(
        &self,
        name: &PoolName,
        tenant: &Namespace,
        now: Millis,
    ) -> StoreResult<Grant> {
        let ns = tenant.as_str();
        let mut tx = self.pool.begin().await.map_err(db)?;
        // The tenant's pool edits take the same turn: a pool of its own cannot be created by
        // this name while the grant is written.
        sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended('pools:' || $1, 0))")
            .bind(ns)
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        // Held until the grant commits, so the pool cannot be deleted under it.
        let exists = sqlx::query("SELECT 1 FROM shared_pools WHERE name = $1 FOR SHARE")
            .bind(name.as_str())
            .fetch_optional(&mut *tx)
            .await
            .map_err(db)?
            .is_some();
        if !exists {
            return Ok(Grant::NoSuchPool);
        }
        let own: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM pools WHERE namespace = $1 AND name = $2)",
        )
        .bind(ns)
        .bind(name.as_str())
        .fetch_one(&mut *tx)
        .await
        .map_err(db)?;
        if own {
            return Ok(Grant::OwnPool);
        }
        sqlx::query(
            "INSERT INTO pool_grants (pool, namespace, granted_at) VALUES ($1, $2, $3) \
             ON CONFLICT (pool, namespace) DO NOTHING",
        )
        .bind(name.as_str())
        .bind(ns)
        .bind(now)
        .execute(&mut *tx)
        .await
        .map_err(db)?;
        let version = bump(&mut tx, ns).await?;
        tx.commit().await.map_err(db)?;
        Ok(Grant::Granted { version })
    }

    async fn revoke_pool(&self, name: &PoolName, tenant: &Namespace) -> StoreResult<Option<u64>> {
        let mut tx = self.pool.begin().await.map_err(db)?;
        let gone = sqlx::query("DELETE FROM pool_grants WHERE pool = $1 AND namespace = $2")
            .bind(name.as_str())
            .bind(tenant.as_str())
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        if gone.rows_affected() == 0 {
            return Ok(None);
        }
        let version = bump(&mut tx, tenant.as_str()).await?;
        tx.commit().await.map_err(db)?;
        Ok(Some(version))
    }

    async fn granted_pools(&self, tenant: &Namespace) -> StoreResult<Vec<SharedPool>> {
        let rows = sqlx::query(&format!(
            "{SELECT} WHERE g.namespace = $1 ORDER BY p.name, g.namespace"
        ))
        .bind(tenant.as_str())
        .fetch_all(&self.pool)
        .await
        .map_err(db)?;
        pools(&rows)
    }
}
