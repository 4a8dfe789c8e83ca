//! Schedules.

use async_trait::async_trait;
use rusqlite::{Row, params};

use super::SqliteStore;
use super::rows::{col, from_json, to_json};
use super::sql::db;
use super::writer::Wrote;
use crate::model::{Millis, Namespace, ScheduleId, Scope};
use crate::store::{ScheduleRow, Schedules, StoreError, StoreResult};

fn row_from(row: &Row<'_>) -> StoreResult<ScheduleRow> {
    let doc: String = col(row, "doc")?;
    Ok(ScheduleRow {
        schedule: from_json(&doc, "schedule")?,
        due_at: col(row, "due_at")?,
        revision: col(row, "revision")?,
    })
}

fn rows_from(mut rows: rusqlite::Rows<'_>) -> StoreResult<Vec<ScheduleRow>> {
    let mut out = Vec::new();
    while let Some(row) = rows.next().map_err(db)? {
        out.push(row_from(row)?);
    }
    Ok(out)
}

fn only(scope: &Scope) -> Option<String> {
    scope.namespace().map(|ns| ns.as_str().to_owned())
}

#[async_trait]
impl Schedules for SqliteStore {
    async fn create_schedule(&self, row: &ScheduleRow, max_per_tenant: usize) -> StoreResult<()> {
        let s = &row.schedule;
        let (ns, id, doc) = (
            s.namespace.as_str().to_owned(),
            s.id.to_string(),
            to_json(s),
        );
        let (due_at, revision) = (row.due_at, row.revision);
        self.writer
            .write(move |conn| {
                let held: i64 = conn
                    .prepare_cached("SELECT count(*) FROM schedules WHERE namespace = ?")
                    .map_err(db)?
                    .query_row([&ns], |r| r.get(0))
                    .map_err(db)?;
                if held >= max_per_tenant as i64 {
                    return Err(StoreError::Refused(format!(
                        "the tenant already has {held} schedules, the most allowed (max_schedules); delete one first"
                    )));
                }
                conn.prepare_cached(
                    "INSERT INTO schedules (namespace, id, doc, due_at, revision) VALUES (?, ?, ?, ?, ?)",
                )
                .map_err(db)?
                .execute(params![ns, id, doc, due_at, revision])
                .map_err(db)?;
                Ok(Wrote::Keep(()))
            })
            .await
    }

    async fn schedule(
        &self,
        tenant: &Namespace,
        id: &ScheduleId,
    ) -> StoreResult<Option<ScheduleRow>> {
        let (ns, id) = (tenant.as_str().to_owned(), id.to_string());
        self.readers
            .read(move |conn| {
                let mut stmt = conn
                    .prepare_cached(
                        "SELECT doc, due_at, revision FROM schedules WHERE namespace = ? AND id = ?",
                    )
                    .map_err(db)?;
                Ok(rows_from(stmt.query(params![ns, id]).map_err(db)?)?.pop())
            })
            .await
    }

    async fn schedules(
        &self,
        scope: &Scope,
        after: Option<(&str, &ScheduleId)>,
        limit: usize,
    ) -> StoreResult<Vec<ScheduleRow>> {
        let only = only(scope);
        let (after_ns, after_id) = after
            .map(|(ns, id)| (ns.to_owned(), id.to_string()))
            .unwrap_or_default();
        self.readers
            .read(move |conn| {
                let mut stmt = conn
                    .prepare_cached(
                        "SELECT doc, due_at, revision FROM schedules \
                         WHERE (?1 IS NULL OR namespace = ?1) AND (namespace, id) > (?2, ?3) \
                         ORDER BY namespace, id LIMIT ?4",
                    )
                    .map_err(db)?;
                rows_from(
                    stmt.query(params![only, after_ns, after_id, limit as i64])
                        .map_err(db)?,
                )
            })
            .await
    }

    async fn save_schedule(&self, row: &ScheduleRow) -> StoreResult<bool> {
        let s = &row.schedule;
        let (ns, id, doc) = (
            s.namespace.as_str().to_owned(),
            s.id.to_string(),
            to_json(s),
        );
        let (due_at, revision) = (row.due_at, row.revision);
        self.writer
            .write(move |conn| {
                let saved = conn
                    .prepare_cached(
                        "UPDATE schedules SET doc = ?, due_at = ?, revision = revision + 1 \
                         WHERE namespace = ? AND id = ? AND revision = ?",
                    )
                    .map_err(db)?
                    .execute(params![doc, due_at, ns, id, revision])
                    .map_err(db)?;
                Ok(Wrote::Keep(saved > 0))
            })
            .await
    }

    async fn delete_schedule(&self, tenant: &Namespace, id: &ScheduleId) -> StoreResult<bool> {
        let (ns, id) = (tenant.as_str().to_owned(), id.to_string());
        self.writer
            .write(move |conn| {
                let deleted = conn
                    .prepare_cached("DELETE FROM schedules WHERE namespace = ? AND id = ?")
                    .map_err(db)?
                    .execute(params![ns, id])
                    .map_err(db)?;
                Ok(Wrote::Keep(deleted > 0))
            })
            .await
    }

    async fn claim_schedules(
        &self,
        scope: &Scope,
        now: Millis,
        until: Millis,
        limit: usize,
    ) -> StoreResult<Vec<ScheduleRow>> {
        let only = only(scope);
        self.writer
            .write(move |conn| {
                let mut stmt = conn
                    .prepare_cached(
                        "UPDATE schedules SET due_at = ?1, revision = revision + 1 \
                         WHERE rowid IN (SELECT rowid FROM schedules \
                           WHERE due_at <= ?2 AND (?3 IS NULL OR namespace = ?3) \
                           ORDER BY due_at LIMIT ?4) \
                         RETURNING doc, due_at, revision",
                    )
                    .map_err(db)?;
                let claimed = rows_from(
                    stmt.query(params![until, now, only, limit as i64])
                        .map_err(db)?,
                )?;
                Ok(Wrote::Keep(claimed))
            })
            .await
    }

    async fn next_schedule_due(&self, scope: &Scope) -> StoreResult<Option<Millis>> {
        let only = only(scope);
        self.readers
            .read(move |conn| {
                conn.prepare_cached(
                    "SELECT min(due_at) FROM schedules WHERE (?1 IS NULL OR namespace = ?1)",
                )
                .map_err(db)?
                .query_row(params![only], |r| r.get(0))
                .map_err(db)
            })
            .await
    }
}
