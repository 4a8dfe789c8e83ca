//! Delivering a published event: the statements of `rules::events`, in one transaction.

use async_trait::async_trait;
use serde_json::Value;
use sqlx::{PgConnection, Row};

use super::PgStore;
use super::rows::{db, run_id};
use super::sql::{Sql, push_scope};
use crate::model::{EventId, Millis, Namespace, PublishedEvent, RunId, Scope};
use crate::store::rules::events::{self, EventStatements};
use crate::store::{EventDelivered, Events, StoreResult};

#[async_trait]
impl Events for PgStore {
    async fn deliver_event(
        &self,
        tenant: &Namespace,
        event: &PublishedEvent,
        now: Millis,
    ) -> StoreResult<EventDelivered> {
        let mut tx = self.pool.begin().await.map_err(db)?;
        // One tenant's deliveries of one id take turns, so a repeat finds the first kept.
        if let Some(id) = &event.id {
            sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))")
                .bind(format!("durable-event:{tenant}:{id}"))
                .execute(&mut *tx)
                .await
                .map_err(db)?;
        }
        let delivered = events::deliver_event(&mut *tx, tenant, event, now).await?;
        tx.commit().await.map_err(db)?;
        Ok(delivered)
    }
}

impl EventStatements for PgConnection {
    async fn delivered_before(
        &mut self,
        tenant: &Namespace,
        id: &EventId,
    ) -> StoreResult<Option<u32>> {
        let delivered: Option<i32> =
            sqlx::query_scalar("SELECT delivered FROM events WHERE namespace = $1 AND id = $2")
                .bind(tenant.as_str())
                .bind(id.as_str())
                .fetch_optional(&mut *self)
                .await
                .map_err(db)?;
        Ok(delivered.map(|n| u32::try_from(n).unwrap_or(0)))
    }

    async fn waits_for(
        &mut self,
        tenant: &Namespace,
        signal: &str,
    ) -> StoreResult<Vec<(RunId, u32, Option<Value>)>> {
        let mut sql = Sql::new(
            "SELECT c.run_id, c.seq, c.input FROM checkpoints c JOIN runs r ON r.id = c.run_id \
             WHERE c.kind = 'signal' AND c.status = 'pending' AND c.name = ",
        );
        sql.push_bind(signal.to_owned());
        sql.push(" AND r.status IN ('pending', 'running', 'suspended', 'blocked')");
        push_scope(&mut sql, "r.namespace", &Scope::Only(tenant.clone()));
        sql.push(" ORDER BY c.run_id, c.seq");
        let rows = sql.build().fetch_all(&mut *self).await.map_err(db)?;
        rows.iter()
            .map(|row| {
                let seq: i32 = row.try_get("seq").map_err(db)?;
                Ok((
                    run_id(row.try_get("run_id").map_err(db)?)?,
                    u32::try_from(seq).unwrap_or_default(),
                    row.try_get("input").map_err(db)?,
                ))
            })
            .collect()
    }

    async fn keep_event(
        &mut self,
        tenant: &Namespace,
        id: &EventId,
        name: &str,
        delivered: u32,
        now: Millis,
    ) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO events (namespace, id, name, delivered, created_at) \
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(tenant.as_str())
        .bind(id.as_str())
        .bind(name)
        .bind(i32::try_from(delivered).unwrap_or(i32::MAX))
        .bind(now)
        .execute(&mut *self)
        .await
        .map_err(db)?;
        Ok(())
    }
}
