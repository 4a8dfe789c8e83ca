//! Retention's statements: an expired family's runs deleted in one statement (their
//! checkpoints and signals go with them, `ON DELETE CASCADE`), in a repeatable-read
//! transaction; roots another control plane is deleting now are skipped, not waited for.

use async_trait::async_trait;
use sqlx::{PgPool, Row};

use super::PgStore;
use super::rows::db;
use super::sql::{Sql, push_scope};
use crate::model::{Millis, Namespace, Scope};
use crate::store::rules::retention::final_statuses;
use crate::store::{Retention, StoreError, StoreResult};

pub(super) async fn prune_runs(
    pool: &PgPool,
    tenant: &Namespace,
    finished_before: Millis,
    families: u32,
) -> StoreResult<u64> {
    let mut sql = Sql::new("WITH roots AS (");
    push_roots(&mut sql, tenant, finished_before);
    sql.push(" ORDER BY r.finished_at LIMIT ")
        .push_bind(i64::from(families))
        .push(" FOR UPDATE SKIP LOCKED) DELETE FROM runs WHERE id IN (");
    push_family(&mut sql);
    sql.push(")");
    // One snapshot for the check and the delete: a run of the family moved since (a retried
    // child back to `pending`, say) makes the delete fail with a serialization error instead of
    // taking a live run, and the next round looks again.
    let mut tx = pool.begin().await.map_err(db)?;
    sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        .execute(&mut *tx)
        .await
        .map_err(db)?;
    let done = sql.build().execute(&mut *tx).await.map_err(db)?;
    tx.commit().await.map_err(db)?;
    Ok(done.rows_affected())
}

pub(super) async fn prunable_runs(
    pool: &PgPool,
    tenant: &Namespace,
    finished_before: Millis,
) -> StoreResult<u64> {
    let mut sql = Sql::new("WITH roots AS (");
    push_roots(&mut sql, tenant, finished_before);
    sql.push(") SELECT COUNT(*) FROM (");
    push_family(&mut sql);
    sql.push(") f");
    let row = sql.build().fetch_one(pool).await.map_err(db)?;
    let n: i64 = row
        .try_get(0)
        .map_err(|e| StoreError::Corrupt(e.to_string()))?;
    Ok(n.max(0) as u64)
}

/// The roots of `tenant`'s families that ended before the cut with every run in them.
fn push_roots(sql: &mut Sql, tenant: &Namespace, finished_before: Millis) {
    let done = final_statuses();
    sql.push(format!(
        "SELECT r.id FROM runs r WHERE r.parent_run_id IS NULL AND r.id = r.root_run_id \
         AND r.status IN ({done}) AND r.finished_at < "
    ))
    .push_bind(finished_before);
    push_scope(sql, "r.namespace", &Scope::Only(tenant.clone()));
    sql.push(format!(
        " AND NOT EXISTS (SELECT 1 FROM runs m WHERE m.root_run_id = r.id AND m.root_run_id <> m.id \
         AND (m.status NOT IN ({done}) OR m.finished_at IS NULL OR m.finished_at >= "
    ))
    .push_bind(finished_before)
    .push("))");
}

/// The ids of the `roots`' families: the roots, their children and their continuations.
fn push_family(sql: &mut Sql) {
    sql.push(
        "SELECT id FROM roots UNION ALL SELECT c.id FROM runs c JOIN roots \
         ON c.root_run_id = roots.id WHERE c.root_run_id <> c.id",
    );
}

#[async_trait]
impl Retention for PgStore {
    async fn prune_runs(
        &self,
        tenant: &Namespace,
        finished_before: Millis,
        families: u32,
    ) -> StoreResult<u64> {
        prune_runs(&self.pool, tenant, finished_before, families).await
    }

    async fn prunable_runs(&self, tenant: &Namespace, finished_before: Millis) -> StoreResult<u64> {
        prunable_runs(&self.pool, tenant, finished_before).await
    }
}
