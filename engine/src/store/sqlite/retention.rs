//! Retention's statements: an expired family's runs deleted in one statement (their
//! checkpoints, signals, tag and attribute rows go with them, `ON DELETE CASCADE`), on the
//! writer thread, a batch at a time.

use async_trait::async_trait;
use rusqlite::Connection;

use super::SqliteStore;
use super::rows::col;
use super::sql::Sql;
use super::writer::Wrote;
use crate::model::{Millis, Namespace, Scope};
use crate::store::rules::retention::final_statuses;
use crate::store::{Retention, StoreResult};

pub(super) fn prune_runs(
    conn: &Connection,
    tenant: &Namespace,
    finished_before: Millis,
    families: u32,
) -> StoreResult<Wrote<u64>> {
    let mut sql = Sql::new("WITH roots AS (");
    push_roots(&mut sql, tenant, finished_before);
    sql.push(" ORDER BY r.finished_at LIMIT ")
        .bind(i64::from(families))
        .push(") DELETE FROM runs WHERE id IN (");
    push_family(&mut sql);
    sql.push(")");
    Ok(Wrote::Keep(sql.execute(conn)?))
}

pub(super) fn prunable_runs(
    conn: &Connection,
    tenant: &Namespace,
    finished_before: Millis,
) -> StoreResult<u64> {
    let mut sql = Sql::new("WITH roots AS (");
    push_roots(&mut sql, tenant, finished_before);
    sql.push(") SELECT COUNT(*) AS n FROM (");
    push_family(&mut sql);
    sql.push(")");
    let n: Option<i64> = sql.one(conn, |row| col(row, "n"))?;
    Ok(n.unwrap_or(0).max(0) as u64)
}

/// The roots of `tenant`'s families that ended before the cut with every run in them.
fn push_roots(sql: &mut Sql, tenant: &Namespace, finished_before: Millis) {
    let done = final_statuses();
    sql.push(&format!(
        "SELECT r.id FROM runs r WHERE r.parent_run_id IS NULL AND r.id = r.root_run_id \
         AND r.status IN ({done}) AND r.finished_at < "
    ))
    .bind(finished_before)
    .scope("r.namespace", &Scope::Only(tenant.clone()))
    .push(&format!(
        " AND NOT EXISTS (SELECT 1 FROM runs m WHERE m.root_run_id = r.id AND m.id <> r.id \
         AND (m.status NOT IN ({done}) OR m.finished_at IS NULL OR m.finished_at >= "
    ))
    .bind(finished_before)
    .push("))");
}

/// The ids of the `roots`' families: the roots, their children and their continuations.
fn push_family(sql: &mut Sql) {
    sql.push(
        "SELECT id FROM roots UNION ALL SELECT c.id FROM runs c JOIN roots \
         ON c.root_run_id = roots.id WHERE c.id <> roots.id",
    );
}

#[async_trait]
impl Retention for SqliteStore {
    async fn prune_runs(
        &self,
        tenant: &Namespace,
        finished_before: Millis,
        families: u32,
    ) -> StoreResult<u64> {
        let tenant = tenant.clone();
        self.writer
            .write(move |conn| prune_runs(conn, &tenant, finished_before, families))
            .await
    }

    async fn prunable_runs(&self, tenant: &Namespace, finished_before: Millis) -> StoreResult<u64> {
        let tenant = tenant.clone();
        self.readers
            .read(move |conn| prunable_runs(conn, &tenant, finished_before))
            .await
    }
}
