//! Connections and tenants' data keys; an edit of a connection bumps the tenant's definitions
//! version in the same transaction.

use std::collections::BTreeMap;

use async_trait::async_trait;
use sqlx::Row;
use sqlx::postgres::PgRow;
use sqlx::types::Json;

use super::PgStore;
use super::pools::{bump, corrupt};
use super::rows::db;
use crate::model::{ConnectionName, Millis, Namespace};
use crate::store::rules::connections::{kind, still_at};
use crate::store::rules::pools::room_for_one_more;
use crate::store::{ConnectionPut, Connections, StoreResult, StoredConnection, TenantKey};

const COLUMNS: &str =
    "name, kind, base_url, headers, secret_set_at, sealed, revision, created_at, updated_at";

fn connection(tenant: &Namespace, row: &PgRow) -> StoreResult<StoredConnection> {
    let name: String = row.try_get(0).map_err(corrupt)?;
    let kind_raw: String = row.try_get(1).map_err(corrupt)?;
    let headers: Json<BTreeMap<String, String>> = row.try_get(3).map_err(corrupt)?;
    let set_at: Json<BTreeMap<String, Millis>> = row.try_get(4).map_err(corrupt)?;
    Ok(StoredConnection {
        tenant: tenant.clone(),
        name: ConnectionName::parse(&name).map_err(corrupt)?,
        kind: kind(&kind_raw)?,
        base_url: row.try_get(2).map_err(corrupt)?,
        headers: headers.0,
        secret_set_at: set_at.0,
        sealed: row.try_get(5).map_err(corrupt)?,
        revision: row.try_get(6).map_err(corrupt)?,
        created_at: row.try_get(7).map_err(corrupt)?,
        updated_at: row.try_get(8).map_err(corrupt)?,
    })
}

fn tenant_key(row: &PgRow) -> StoreResult<TenantKey> {
    let tenant: String = row.try_get(0).map_err(corrupt)?;
    Ok(TenantKey {
        tenant: Namespace::parse(&tenant).map_err(corrupt)?,
        master_key_id: row.try_get(1).map_err(corrupt)?,
        wrapped: row.try_get(2).map_err(corrupt)?,
    })
}

#[async_trait]
impl Connections for PgStore {
    async fn put_connection(
        &self,
        c: &StoredConnection,
        max_per_tenant: usize,
    ) -> StoreResult<ConnectionPut> {
        let ns = c.tenant.as_str();
        let mut tx = self.pool.begin().await.map_err(db)?;
        // One tenant's connection edits take turns: two creates cannot both pass the count,
        // and a revision read here is the one written over.
        sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended('connections:' || $1, 0))")
            .bind(ns)
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        let stored: Option<i64> = sqlx::query_scalar(
            "SELECT revision FROM connections WHERE namespace = $1 AND name = $2",
        )
        .bind(ns)
        .bind(c.name.as_str())
        .fetch_optional(&mut *tx)
        .await
        .map_err(db)?;
        if !still_at(stored, c.revision) {
            return Ok(ConnectionPut::Stale);
        }
        if stored.is_none() {
            let held: i64 =
                sqlx::query_scalar("SELECT count(*) FROM connections WHERE namespace = $1")
                    .bind(ns)
                    .fetch_one(&mut *tx)
                    .await
                    .map_err(db)?;
            room_for_one_more(held, max_per_tenant, "connections", "max_connections")?;
        }
        sqlx::query(
            "INSERT INTO connections (namespace, name, kind, base_url, headers, secret_set_at, \
             sealed, revision, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) \
             ON CONFLICT (namespace, name) DO UPDATE \
             SET kind = excluded.kind, base_url = excluded.base_url, headers = excluded.headers, \
             secret_set_at = excluded.secret_set_at, sealed = excluded.sealed, \
             revision = excluded.revision, updated_at = excluded.updated_at",
        )
        .bind(ns)
        .bind(c.name.as_str())
        .bind(c.kind.as_str())
        .bind(c.base_url.as_deref())
        .bind(Json(&c.headers))
        .bind(Json(&c.secret_set_at))
        .bind(&c.sealed)
        .bind(c.revision + 1)
        .bind(c.created_at)
        .bind(c.updated_at)
        .execute(&mut *tx)
        .await
        .map_err(db)?;
        let version = bump(&mut tx, ns).await?;
        tx.commit().await.map_err(db)?;
        Ok(ConnectionPut::Stored {
            created: stored.is_none(),
            version,
        })
    }

    async fn connections(&self, tenant: &Namespace) -> StoreResult<Vec<StoredConnection>> {
        let rows = sqlx::query(&format!(
            "SELECT {COLUMNS} FROM connections WHERE namespace = $1 ORDER BY name"
        ))
        .bind(tenant.as_str())
        .fetch_all(&self.pool)
        .await
        .map_err(db)?;
        rows.iter().map(|row| connection(tenant, row)).collect()
    }

    async fn connection(
        &self,
        tenant: &Namespace,
        name: &ConnectionName,
    ) -> StoreResult<Option<StoredConnection>> {
        let row = sqlx::query(&format!(
            "SELECT {COLUMNS} FROM connections WHERE namespace = $1 AND name = $2"
        ))
        .bind(tenant.as_str())
        .bind(name.as_str())
        .fetch_optional(&self.pool)
        .await
        .map_err(db)?;
        row.map(|row| connection(tenant, &row)).transpose()
    }

    async fn delete_connection(
        &self,
        tenant: &Namespace,
        name: &ConnectionName,
    ) -> StoreResult<Option<u64>> {
        let mut tx = self.pool.begin().await.map_err(db)?;
        let gone = sqlx::query("DELETE FROM connections WHERE namespace = $1 AND name = $2")
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

    async fn any_connections(&self) -> StoreResult<bool> {
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM connections)")
            .fetch_one(&self.pool)
            .await
            .map_err(db)
    }

    async fn tenant_key(&self, tenant: &Namespace) -> StoreResult<Option<TenantKey>> {
        let row = sqlx::query(
            "SELECT namespace, master_key_id, wrapped FROM tenant_keys WHERE namespace = $1",
        )
        .bind(tenant.as_str())
        .fetch_optional(&self.pool)
        .await
        .map_err(db)?;
        row.as_ref().map(tenant_key).transpose()
    }

    async fn create_tenant_key(&self, key: &TenantKey) -> StoreResult<TenantKey> {
        // The insert that loses a race sees nothing of the winner's row in its own snapshot
        // through RETURNING, so the stored key is read after it.
        sqlx::query(
            "INSERT INTO tenant_keys (namespace, master_key_id, wrapped) VALUES ($1, $2, $3) \
             ON CONFLICT (namespace) DO NOTHING",
        )
        .bind(key.tenant.as_str())
        .bind(&key.master_key_id)
        .bind(&key.wrapped)
        .execute(&self.pool)
        .await
        .map_err(db)?;
        let row = sqlx::query(
            "SELECT namespace, master_key_id, wrapped FROM tenant_keys WHERE namespace = $1",
        )
        .bind(key.tenant.as_str())
        .fetch_one(&self.pool)
        .await
        .map_err(db)?;
        tenant_key(&row)
    }

    async fn tenant_keys(&self) -> StoreResult<Vec<TenantKey>> {
        let rows = sqlx::query(
            "SELECT namespace, master_key_id, wrapped FROM tenant_keys ORDER BY namespace",
        )
        .fetch_all(&self.pool)
        .await
        .map_err(db)?;
        rows.iter().map(tenant_key).collect()
    }

    async fn rewrap_tenant_key(&self, key: &TenantKey, previous_key_id: &str) -> StoreResult<bool> {
        let changed = sqlx::query(
            "UPDATE tenant_keys SET master_key_id = $1, wrapped = $2 \
             WHERE namespace = $3 AND master_key_id = $4",
        )
        .bind(&key.master_key_id)
        .bind(&key.wrapped)
        .bind(key.tenant.as_str())
        .bind(previous_key_id)
        .execute(&self.pool)
        .await
        .map_err(db)?;
        Ok(changed.rows_affected() == 1)
    }
}
