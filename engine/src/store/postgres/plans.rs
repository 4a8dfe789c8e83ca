//! Tenants' plans and their usage counts.

use async_trait::async_trait;
use sqlx::{PgExecutor, Row};

use super::PgStore;
use super::rows::db;
use crate::model::{Millis, Namespace, Plan, Usage};
use crate::store::rules::lifecycle::KEY_STARTED_SQL;
use crate::store::rules::plans::{MINUTE_MS, STARTED_SQL, USAGE_SQL, decode, key_of, tenant_of};
use crate::store::{Plans, StoreError, StoreResult};

#[async_trait]
impl Plans for PgStore {
    async fn plans(&self) -> StoreResult<Vec<(Option<Namespace>, Plan)>> {
        stored_plans(&self.pool).await
    }

    async fn put_plan(
        &self,
        tenant: Option<&Namespace>,
        plan: &Plan,
        now: Millis,
    ) -> StoreResult<()> {
        let key = key_of(tenant);
        if plan == &Plan::default() {
            sqlx::query("DELETE FROM plans WHERE tenant = $1")
                .bind(&key)
                .execute(&self.pool)
                .await
                .map_err(db)?;
            return Ok(());
        }
        let json = serde_json::to_string(plan)
            .map_err(|e| StoreError::Corrupt(format!("encoding a plan: {e}")))?;
        sqlx::query(
            "INSERT INTO plans (tenant, plan, updated_at) VALUES ($1, $2::jsonb, $3) \
             ON CONFLICT (tenant) DO UPDATE SET plan = EXCLUDED.plan, updated_at = EXCLUDED.updated_at",
        )
        .bind(&key)
        .bind(json)
        .bind(now)
        .execute(&self.pool)
        .await
        .map_err(db)?;
        Ok(())
    }

    async fn usage(&self, tenant: &Namespace, now: Millis) -> StoreResult<Usage> {
        let row = sqlx::query(USAGE_SQL)
            .bind(tenant.as_str())
            .bind(now - MINUTE_MS)
            .fetch_one(&self.pool)
            .await
            .map_err(db)?;
        let count = |i: usize| -> StoreResult<u64> {
            Ok(row.try_get::<i64, _>(i).map_err(db)?.max(0) as u64)
        };
        Ok(Usage {
            running: count(0)?,
            queued: count(1)?,
            started_last_minute: count(2)?,
        })
    }

    async fn started(&self, tenant: &Namespace) -> StoreResult<u64> {
        let n: i64 = sqlx::query_scalar(STARTED_SQL)
            .bind(tenant.as_str())
            .fetch_one(&self.pool)
            .await
            .map_err(db)?;
        Ok(n.max(0) as u64)
    }

    async fn started_with_key(
        &self,
        tenant: &Namespace,
        workflow: &str,
        key: &str,
    ) -> StoreResult<u64> {
        let n: i64 = sqlx::query_scalar(KEY_STARTED_SQL)
            .bind(tenant.as_str())
            .bind(workflow)
            .bind(key)
            .fetch_one(&self.pool)
            .await
            .map_err(db)?;
        Ok(n.max(0) as u64)
    }
}

/// Every stored plan, the default's (`None`) among them, through `conn`: the pool, or a
/// claim's transaction, which counts against the plans as stored.
pub(super) async fn stored_plans(
    conn: impl PgExecutor<'_>,
) -> StoreResult<Vec<(Option<Namespace>, Plan)>> {
    let rows = sqlx::query("SELECT tenant, plan::text FROM plans ORDER BY tenant")
        .fetch_all(conn)
        .await
        .map_err(db)?;
    rows.iter()
        .map(|row| {
            let tenant: String = row.try_get(0).map_err(db)?;
            let plan: String = row.try_get(1).map_err(db)?;
            Ok((tenant_of(&tenant), decode(&tenant, &plan)?))
        })
        .collect()
}
