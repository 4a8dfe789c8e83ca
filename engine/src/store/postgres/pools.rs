//! Pools, and the definitions version their edits bump (in the same transaction).

use std::collections::BTreeMap;

use async_trait::async_trait;
use sqlx::{PgConnection, Row};

use super::PgStore;
use super::rows::db;
use crate::model::{Millis, Namespace, Pool, PoolName, RoutingRules};
use crate::store::rules::pools::{as_stored, granted_name, room_for_one_more};
use crate::store::{PoolPut, Pools, StoreError, StoreResult};

/// Bumps `tenant`'s definitions version; the version after it.
pub(super) async fn bump(conn: &mut PgConnection, tenant: &str) -> StoreResult<u64> {
    let version: i64 = sqlx::query_scalar(
        "INSERT INTO definition_versions (namespace, version) VALUES ($1, 1) \
         ON CONFLICT (namespace) DO UPDATE SET version = definition_versions.version + 1 \
         RETURNING version",
    )
    .bind(tenant)
    .fetch_one(conn)
    .await
    .map_err(db)?;
    Ok(version.max(0) as u64)
}

pub(super) fn corrupt(e: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(e.to_string())
}

#[async_trait]
impl Pools for PgStore {
    async fn put_pool(&self, pool: &Pool, max_per_tenant: usize) -> StoreResult<PoolPut> {
        let ns = pool.tenant.as_str();
        let mut tx = self.pool.begin().await.map_err(db)?;
        // One tenant's pool edits take turns, so two creates cannot both pass the count.
        sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended('pools:' || $1, 0))")
            .bind(ns)
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        let existing: Option<i64> =
            sqlx::query_scalar("SELECT created_at FROM pools WHERE namespace = $1 AND name = $2")
                .bind(ns)
                .bind(pool.name.as_str())
                .fetch_optional(&mut *tx)
                .await
                .map_err(db)?;
        if existing.is_none() {
            let granted: bool = sqlx::query_scalar(
                "SELECT EXISTS (SELECT 1 FROM pool_grants WHERE namespace = $1 AND pool = $2)",
            )
            .bind(ns)
            .bind(pool.name.as_str())
            .fetch_one(&mut *tx)
            .await
            .map_err(db)?;
            if granted {
                return Err(granted_name(pool.name.as_str()));
            }
            let held: i64 = sqlx::query_scalar("SELECT count(*) FROM pools WHERE namespace = $1")
                .bind(ns)
                .fetch_one(&mut *tx)
                .await
                .map_err(db)?;
            room_for_one_more(held, max_per_tenant, "pools", "max_pools")?;
        }
        let stored = as_stored(pool, existing);
        sqlx::query(
            "INSERT INTO pools (namespace, name, labels, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT (namespace, name) DO UPDATE \
             SET labels = excluded.labels, updated_at = excluded.updated_at",
        )
        .bind(ns)
        .bind(stored.name.as_str())
        .bind(sqlx::types::Json(&stored.labels))
        .bind(stored.created_at)
        .bind(stored.updated_at)
        .execute(&mut *tx)
        .await
        .map_err(db)?;
        let version = bump(&mut tx, ns).await?;
        tx.commit().await.map_err(db)?;
        Ok(PoolPut {
            pool: stored,
            created: existing.is_none(),
            version,
        })
    }

    async fn pools(&self, tenant: &Namespace) -> StoreResult<Vec<Pool>> {
        let rows = sqlx::query(
            "SELECT name, labels, created_at, updated_at FROM pools \
             WHERE namespace = $1 ORDER BY name",
        )
        .bind(tenant.as_str())
        .fetch_all(&self.pool)
        .await
        .map_err(db)?;
        rows.iter()
            .map(|row| {
                let name: String = row.try_get(0).map_err(corrupt)?;
                let labels: sqlx::types::Json<BTreeMap<String, String>> =
                    row.try_get(1).map_err(corrupt)?;
                Ok(Pool {
                    tenant: tenant.clone(),
                    name: PoolName::parse(&name).map_err(corrupt)?,
                    labels: labels.0,
                    created_at: row.try_get(2).map_err(corrupt)?,
                    updated_at: row.try_get(3).map_err(corrupt)?,
                    shared: false,
                })
            })
            .collect()
    }

    async fn delete_pool(&self, tenant: &Namespace, name: &PoolName) -> StoreResult<Option<u64>> {
        let mut tx = self.pool.begin().await.map_err(db)?;
        let gone = sqlx::query("DELETE FROM pools WHERE namespace = $1 AND name = $2")
            .bind(tenant.as_str())
            .bind(name.as_str())
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

    async fn definitions_version(&self, tenant: &Namespace) -> StoreResult<u64> {
        let version: Option<i64> =
            sqlx::query_scalar("SELECT version FROM definition_versions WHERE namespace = $1")
                .bind(tenant.as_str())
                .fetch_optional(&self.pool)
                .await
                .map_err(db)?;
        Ok(version.unwrap_or(0).max(0) as u64)
    }

    async fn put_routing_rules(
        &self,
        tenant: &Namespace,
        rules: &RoutingRules,
        now: Millis,
    ) -> StoreResult<u64> {
        let mut tx = self.pool.begin().await.map_err(db)?;
        sqlx::query(
            "INSERT INTO routing_rules (namespace, rules, updated_at) VALUES ($1, $2, $3) \
             ON CONFLICT (namespace) DO UPDATE \
             SET rules = excluded.rules, updated_at = excluded.updated_at",
        )
        .bind(tenant.as_str())
        .bind(sqlx::types::Json(rules))
        .bind(now)
        .execute(&mut *tx)
        .await
        .map_err(db)?;
        let version = bump(&mut tx, tenant.as_str()).await?;
        tx.commit().await.map_err(db)?;
        Ok(version)
    }

    async fn steps_out(&self, tenant: &Namespace) -> StoreResult<Vec<(String, u64)>> {
        let rows: Vec<(String, i64)> = sqlx::query_as(
            "SELECT c.worker_group, count(*) FROM checkpoints c JOIN runs r ON r.id = c.run_id \
             WHERE c.status = 'pending' AND c.kind = 'remote_step' \
             AND c.worker_group IS NOT NULL AND r.namespace = $1 \
             GROUP BY c.worker_group ORDER BY c.worker_group",
        )
        .bind(tenant.as_str())
        .fetch_all(&self.pool)
        .await
        .map_err(db)?;
        Ok(rows
            .into_iter()
            .map(|(g, n)| (g, n.max(0) as u64))
            .collect())
    }

    async fn routing_rules(&self, tenant: &Namespace) -> StoreResult<Option<RoutingRules>> {
        let rules: Option<sqlx::types::Json<RoutingRules>> =
            sqlx::query_scalar("SELECT rules FROM routing_rules WHERE namespace = $1")
                .bind(tenant.as_str())
                .fetch_optional(&self.pool)
                .await
                .map_err(db)?;
        Ok(rules.map(|r| r.0))
    }
}
