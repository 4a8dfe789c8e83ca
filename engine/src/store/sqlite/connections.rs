//! Connections and tenants' data keys; an edit of a connection bumps the tenant's definitions
//! version in the same write.

use std::collections::BTreeMap;

use async_trait::async_trait;
use rusqlite::{OptionalExtension, Row, params};

use super::SqliteStore;
use super::pools::bump;
use super::rows::{from_json, to_json};
use super::sql::db;
use super::writer::Wrote;
use crate::model::{ConnectionName, Millis, Namespace};
use crate::store::rules::connections::{kind, still_at};
use crate::store::rules::pools::room_for_one_more;
use crate::store::{
    ConnectionPut, Connections, StoreError, StoreResult, StoredConnection, TenantKey,
};

const COLUMNS: &str =
    "name, kind, base_url, headers, secret_set_at, sealed, revision, created_at, updated_at";

fn connection(tenant: &Namespace, row: &Row<'_>) -> StoreResult<StoredConnection> {
    let name: String = row.get(0).map_err(db)?;
    let kind_raw: String = row.get(1).map_err(db)?;
    let headers: String = row.get(3).map_err(db)?;
    let set_at: String = row.get(4).map_err(db)?;
    Ok(StoredConnection {
        tenant: tenant.clone(),
        name: ConnectionName::parse(&name).map_err(|e| StoreError::Corrupt(e.to_string()))?,
        kind: kind(&kind_raw)?,
        base_url: row.get(2).map_err(db)?,
        headers: from_json::<BTreeMap<String, String>>(&headers, "connection headers")?,
        secret_set_at: from_json::<BTreeMap<String, Millis>>(&set_at, "connection secrets")?,
        sealed: row.get(5).map_err(db)?,
        revision: row.get(6).map_err(db)?,
        created_at: row.get(7).map_err(db)?,
        updated_at: row.get(8).map_err(db)?,
    })
}

fn tenant_key(row: &Row<'_>) -> StoreResult<TenantKey> {
    let tenant: String = row.get(0).map_err(db)?;
    Ok(TenantKey {
        tenant: Namespace::parse(&tenant).map_err(|e| StoreError::Corrupt(e.to_string()))?,
        master_key_id: row.get(1).map_err(db)?,
        wrapped: row.get(2).map_err(db)?,
    })
}

#[async_trait]
impl Connections for SqliteStore {
    async fn put_connection(
        &self,
        connection: &StoredConnection,
        max_per_tenant: usize,
    ) -> StoreResult<ConnectionPut> {
        let c = connection.clone();
        self.writer
            .write(move |conn| {
                let ns = c.tenant.as_str();
                let stored: Option<i64> = conn
                    .prepare_cached(
                        "SELECT revision FROM connections WHERE namespace = ? AND name = ?",
                    )
                    .map_err(db)?
                    .query_row(params![ns, c.name.as_str()], |r| r.get(0))
                    .optional()
                    .map_err(db)?;
                if !still_at(stored, c.revision) {
                    return Ok(Wrote::Keep(ConnectionPut::Stale));
                }
                if stored.is_none() {
                    let held: i64 = conn
                        .prepare_cached("SELECT count(*) FROM connections WHERE namespace = ?")
                        .map_err(db)?
                        .query_row([ns], |r| r.get(0))
                        .map_err(db)?;
                    room_for_one_more(held, max_per_tenant, "connections", "max_connections")?;
                }
                conn.prepare_cached(
                    "INSERT INTO connections (namespace, name, kind, base_url, headers, \
                     secret_set_at, sealed, revision, created_at, updated_at) \
                     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (namespace, name) DO UPDATE \
                     SET kind = excluded.kind, base_url = excluded.base_url, \
                     headers = excluded.headers, secret_set_at = excluded.secret_set_at, \
                     sealed = excluded.sealed, revision = excluded.revision, \
                     updated_at = excluded.updated_at",
                )
                .map_err(db)?
                .execute(params![
                    ns,
                    c.name.as_str(),
                    c.kind.as_str(),
                    c.base_url,
                    to_json(&c.headers),
                    to_json(&c.secret_set_at),
                    c.sealed,
                    c.revision + 1,
                    c.created_at,
                    c.updated_at
                ])
                .map_err(db)?;
                let version = bump(conn, ns)?;
                Ok(Wrote::Keep(ConnectionPut::Stored {
                    created: stored.is_none(),
                    version,
                }))
            })
            .await
    }

    async fn connections(&self, tenant: &Namespace) -> StoreResult<Vec<StoredConnection>> {
        let tenant = tenant.clone();
        self.readers
            .read(move |conn| {
                let mut stmt = conn
                    .prepare_cached(&format!(
                        "SELECT {COLUMNS} FROM connections WHERE namespace = ? ORDER BY name"
                    ))
                    .map_err(db)?;
                let mut rows = stmt.query([tenant.as_str()]).map_err(db)?;
                let mut out = Vec::new();
                while let Some(row) = rows.next().map_err(db)? {
                    out.push(connection(&tenant, row)?);
                }
                Ok(out)
            })
            .await
    }

    async fn connection(
        &self,
        tenant: &Namespace,
        name: &ConnectionName,
    ) -> StoreResult<Option<StoredConnection>> {
        let (tenant, name) = (tenant.clone(), name.clone());
        self.readers
            .read(move |conn| {
                let mut stmt = conn
                    .prepare_cached(&format!(
                        "SELECT {COLUMNS} FROM connections WHERE namespace = ? AND name = ?"
                    ))
                    .map_err(db)?;
                let mut rows = stmt
                    .query(params![tenant.as_str(), name.as_str()])
                    .map_err(db)?;
                rows.next()
                    .map_err(db)?
                    .map(|row| connection(&tenant, row))
                    .transpose()
            })
            .await
    }

    async fn delete_connection(
        &self,
        tenant: &Namespace,
        name: &ConnectionName,
    ) -> StoreResult<Option<u64>> {
        let (ns, name) = (tenant.as_str().to_owned(), name.as_str().to_owned());
        self.writer
            .write(move |conn| {
                let gone = conn
                    .prepare_cached("DELETE FROM connections WHERE namespace = ? AND name = ?")
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

    async fn any_connections(&self) -> StoreResult<bool> {
        self.readers
            .read(|conn| {
                conn.prepare_cached("SELECT EXISTS (SELECT 1 FROM connections)")
                    .map_err(db)?
                    .query_row([], |r| r.get(0))
                    .map_err(db)
            })
            .await
    }

    async fn tenant_key(&self, tenant: &Namespace) -> StoreResult<Option<TenantKey>> {
        let ns = tenant.as_str().to_owned();
        self.readers
            .read(move |conn| {
                let mut stmt = conn
                    .prepare_cached(
                        "SELECT namespace, master_key_id, wrapped FROM tenant_keys \
                         WHERE namespace = ?",
                    )
                    .map_err(db)?;
                let mut rows = stmt.query([ns]).map_err(db)?;
                rows.next().map_err(db)?.map(tenant_key).transpose()
            })
            .await
    }

    async fn create_tenant_key(&self, key: &TenantKey) -> StoreResult<TenantKey> {
        let key = key.clone();
        self.writer
            .write(move |conn| {
                conn.prepare_cached(
                    "INSERT INTO tenant_keys (namespace, master_key_id, wrapped) VALUES (?, ?, ?) \
                     ON CONFLICT (namespace) DO NOTHING",
                )
                .map_err(db)?
                .execute(params![key.tenant.as_str(), key.master_key_id, key.wrapped])
                .map_err(db)?;
                let mut stmt = conn
                    .prepare_cached(
                        "SELECT namespace, master_key_id, wrapped FROM tenant_keys \
                         WHERE namespace = ?",
                    )
                    .map_err(db)?;
                let mut rows = stmt.query([key.tenant.as_str()]).map_err(db)?;
                match rows.next().map_err(db)? {
                    Some(row) => Ok(Wrote::Keep(tenant_key(row)?)),
                    None => Err(StoreError::Corrupt(
                        "a tenant key vanished as it was written".into(),
                    )),
                }
            })
            .await
    }

    async fn tenant_keys(&self) -> StoreResult<Vec<TenantKey>> {
        self.readers
            .read(|conn| {
                let mut stmt = conn
                    .prepare_cached(
                        "SELECT namespace, master_key_id, wrapped FROM tenant_keys \
                         ORDER BY namespace",
                    )
                    .map_err(db)?;
                let mut rows = stmt.query([]).map_err(db)?;
                let mut out = Vec::new();
                while let Some(row) = rows.next().map_err(db)? {
                    out.push(tenant_key(row)?);
                }
                Ok(out)
            })
            .await
    }

    async fn rewrap_tenant_key(&self, key: &TenantKey, previous_key_id: &str) -> StoreResult<bool> {
        let (key, previous) = (key.clone(), previous_key_id.to_owned());
        self.writer
            .write(move |conn| {
                let changed = conn
                    .prepare_cached(
                        "UPDATE tenant_keys SET master_key_id = ?, wrapped = ? \
                         WHERE namespace = ? AND master_key_id = ?",
                    )
                    .map_err(db)?
                    .execute(params![
                        key.master_key_id,
                        key.wrapped,
                        key.tenant.as_str(),
                        previous
                    ])
                    .map_err(db)?;
                Ok(Wrote::Keep(changed == 1))
            })
            .await
    }
}
