//! Tenants' plans and their usage counts.

use async_trait::async_trait;
use rusqlite::{Connection, params};

use super::SqliteStore;
use super::sql::{count, db};
use super::writer::Wrote;
use crate::model::{Millis, Namespace, Plan, Usage};
use crate::store::rules::lifecycle::KEY_STARTED_SQL;
use crate::store::rules::plans::{MINUTE_MS, STARTED_SQL, USAGE_SQL, decode, key_of, tenant_of};
use crate::store::{Plans, StoreResult};

#[async_trait]
impl Plans for SqliteStore {
    async fn plans(&self) -> StoreResult<Vec<(Option<Namespace>, Plan)>> {
        self.readers.read(stored_plans).await
    }

    async fn put_plan(
        &self,
        tenant: Option<&Namespace>,
        plan: &Plan,
        now: Millis,
    ) -> StoreResult<()> {
        let key = key_of(tenant);
        let json = (plan != &Plan::default())
            .then(|| serde_json::to_string(plan))
            .transpose()
            .map_err(|e| crate::store::StoreError::Corrupt(format!("encoding a plan: {e}")))?;
        self.writer
            .write(move |conn| {
                match json {
                    Some(json) => conn
                        .prepare_cached(
                            "INSERT INTO plans (tenant, plan, updated_at) VALUES (?, ?, ?) \
                             ON CONFLICT (tenant) DO UPDATE SET plan = excluded.plan, \
                             updated_at = excluded.updated_at",
                        )
                        .map_err(db)?
                        .execute(params![key, json, now])
                        .map_err(db)?,
                    _ => conn
                        .prepare_cached("DELETE FROM plans WHERE tenant = ?")
                        .map_err(db)?
                        .execute([&key])
                        .map_err(db)?,
                };
                Ok(Wrote::Keep(()))
            })
            .await
    }

    async fn usage(&self, tenant: &Namespace, now: Millis) -> StoreResult<Usage> {
        let tenant = tenant.as_str().to_owned();
        self.readers
            .read(move |conn| {
                let sql = USAGE_SQL.replace('$', "?");
                conn.prepare_cached(&sql)
                    .map_err(db)?
                    .query_row(params![tenant, now - MINUTE_MS], |row| {
                        Ok(Usage {
                            running: row.get::<_, i64>(0)? as u64,
                            queued: row.get::<_, i64>(1)? as u64,
                            started_last_minute: row.get::<_, i64>(2)? as u64,
                        })
                    })
                    .map_err(db)
            })
            .await
    }

    async fn started(&self, tenant: &Namespace) -> StoreResult<u64> {
        let tenant = tenant.as_str().to_owned();
        self.readers
            .read(move |conn| count(conn, STARTED_SQL, params![tenant]))
            .await
    }

    async fn started_with_key(
        &self,
        tenant: &Namespace,
        workflow: &str,
        key: &str,
    ) -> StoreResult<u64> {
        let (tenant, workflow, key) = (
            tenant.as_str().to_owned(),
            workflow.to_owned(),
            key.to_owned(),
        );
        self.readers
            .read(move |conn| count(conn, KEY_STARTED_SQL, params![tenant, workflow, key]))
            .await
    }
}

/// Every stored plan, the default's (`None`) among them, on `conn`: a reader's, or the
/// writer's inside a claim, which counts against the plans as stored.
pub(super) fn stored_plans(conn: &Connection) -> StoreResult<Vec<(Option<Namespace>, Plan)>> {
    let mut stmt = conn
        .prepare_cached("SELECT tenant, plan FROM plans ORDER BY tenant")
        .map_err(db)?;
    let mut rows = stmt.query([]).map_err(db)?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().map_err(db)? {
        let tenant: String = row.get(0).map_err(db)?;
        let plan: String = row.get(1).map_err(db)?;
        out.push((tenant_of(&tenant), decode(&tenant, &plan)?));
    }
    Ok(out)
}
