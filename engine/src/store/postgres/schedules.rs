//! Schedules.

use async_trait::async_trait;
use sqlx::Row;
use sqlx::postgres::PgRow;

use super::PgStore;
use super::rows::db;
use crate::model::{Millis, Namespace, ScheduleId, Scope};
use crate::store::{ScheduleRow, Schedules, StoreError, StoreResult};

fn row_from(row: &PgRow) -> StoreResult<ScheduleRow> {
    let corrupt = |e: sqlx::Error| StoreError::Corrupt(e.to_string());
    let doc: String = row.try_get(0).map_err(corrupt)?;
    Ok(ScheduleRow {
        schedule: serde_json::from_str(&doc)
            .map_err(|e| StoreError::Corrupt(format!("schedule: {e}")))?,
        due_at: row.try_get(1).map_err(corrupt)?,
        revision: row.try_get(2).map_err(corrupt)?,
    })
}

fn doc(row: &ScheduleRow) -> String {
    // Serialising plain data cannot fail.
    serde_json::to_string(&row.schedule).unwrap_or_default()
}

fn only(scope: &Scope) -> Option<&str> {
    scope.namespace().map(Namespace::as_str)
}

#[async_trait]
impl Schedules for PgStore {
    async fn create_schedule(&self, row: &ScheduleRow, max_per_tenant: usize) -> StoreResult<()> {
        let s = &row.schedule;
        let mut tx = self.pool.begin().await.map_err(db)?;
        // Creates for one tenant take turns, so two at once cannot both pass the count.
        sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended('schedules:' || $1, 0))")
            .bind(s.namespace.as_str())
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        let inserted = sqlx::query(
            "INSERT INTO schedules (namespace, id, doc, due_at, revision) \
             SELECT $1, $2, $3, $4, $5 \
             WHERE (SELECT count(*) FROM schedules WHERE namespace = $1) < $6",
        )
        .bind(s.namespace.as_str())
        .bind(s.id.as_str())
        .bind(doc(row))
        .bind(row.due_at)
        .bind(row.revision)
        .bind(max_per_tenant as i64)
        .execute(&mut *tx)
        .await
        .map_err(db)?;
        tx.commit().await.map_err(db)?;
        if inserted.rows_affected() == 0 {
            return Err(StoreError::Refused(format!(
                "the tenant already has {max_per_tenant} schedules, the most allowed (max_schedules); delete one first"
            )));
        }
        Ok(())
    }

    async fn schedule(
        &self,
        tenant: &Namespace,
        id: &ScheduleId,
    ) -> StoreResult<Option<ScheduleRow>> {
        sqlx::query("SELECT doc, due_at, revision FROM schedules WHERE namespace = $1 AND id = $2")
            .bind(tenant.as_str())
            .bind(id.as_str())
            .fetch_optional(&self.pool)
            .await
            .map_err(db)?
            .as_ref()
            .map(row_from)
            .transpose()
    }

    async fn schedules(
        &self,
        scope: &Scope,
        after: Option<(&str, &ScheduleId)>,
        limit: usize,
    ) -> StoreResult<Vec<ScheduleRow>> {
        let (after_ns, after_id) = after.map_or(("", ""), |(ns, id)| (ns, id.as_str()));
        let rows = sqlx::query(
            "SELECT doc, due_at, revision FROM schedules \
             WHERE ($1::text IS NULL OR namespace = $1) AND (namespace, id) > ($2, $3) \
             ORDER BY namespace, id LIMIT $4",
        )
        .bind(only(scope))
        .bind(after_ns)
        .bind(after_id)
        .bind(limit as i64)
        .fetch_all(&self.pool)
        .await
        .map_err(db)?;
        rows.iter().map(row_from).collect()
    }

    async fn save_schedule(&self, row: &ScheduleRow) -> StoreResult<bool> {
        let s = &row.schedule;
        let saved = sqlx::query(
            "UPDATE schedules SET doc = $1, due_at = $2, revision = revision + 1 \
             WHERE namespace = $3 AND id = $4 AND revision = $5",
        )
        .bind(doc(row))
        .bind(row.due_at)
        .bind(s.namespace.as_str())
        .bind(s.id.as_str())
        .bind(row.revision)
        .execute(&self.pool)
        .await
        .map_err(db)?;
        Ok(saved.rows_affected() > 0)
    }

    async fn delete_schedule(&self, tenant: &Namespace, id: &ScheduleId) -> StoreResult<bool> {
        let deleted = sqlx::query("DELETE FROM schedules WHERE namespace = $1 AND id = $2")
            .bind(tenant.as_str())
            .bind(id.as_str())
            .execute(&self.pool)
            .await
            .map_err(db)?;
        Ok(deleted.rows_affected() > 0)
    }

    async fn claim_schedules(
        &self,
        scope: &Scope,
        now: Millis,
        until: Millis,
        limit: usize,
    ) -> StoreResult<Vec<ScheduleRow>> {
        // SKIP LOCKED: control planes claiming at once each take different schedules.
        let rows = sqlx::query(
            "UPDATE schedules s SET due_at = $1, revision = s.revision + 1 \
             FROM (SELECT namespace, id FROM schedules \
                   WHERE due_at <= $2 AND ($3::text IS NULL OR namespace = $3) \
                   ORDER BY due_at LIMIT $4 FOR UPDATE SKIP LOCKED) due \
             WHERE s.namespace = due.namespace AND s.id = due.id \
             RETURNING s.doc, s.due_at, s.revision",
        )
        .bind(until)
        .bind(now)
        .bind(only(scope))
        .bind(limit as i64)
        .fetch_all(&self.pool)
        .await
        .map_err(db)?;
        rows.iter().map(row_from).collect()
    }

    async fn next_schedule_due(&self, scope: &Scope) -> StoreResult<Option<Millis>> {
        let row = sqlx::query(
            "SELECT min(due_at) FROM schedules WHERE ($1::text IS NULL OR namespace = $1)",
        )
        .bind(only(scope))
        .fetch_one(&self.pool)
        .await
        .map_err(db)?;
        row.try_get(0)
            .map_err(|e| StoreError::Corrupt(e.to_string()))
    }
}
