//! The activity minutes' statements: runs started and finished reach `run_minutes` when
//! `fold_run_counts()` folds their deltas (`migrations/postgres/0021_activity.sql`); step
//! tallies are added here, a batch in one transaction (500 rows a statement), in key order so
//! engines adding at once lock shared rows in the same order.

use sqlx::{PgPool, Row};

use super::rows::db;
use super::sql::Sql;
use crate::model::{ActivityMinute, Scope, StepTally};
use crate::store::rules::activity::{minutes, scope_key, step_rows};
use crate::store::{StoreError, StoreResult};

pub(super) async fn activity(
    pool: &PgPool,
    scope: &Scope,
    since_minute: i64,
) -> StoreResult<Vec<ActivityMinute>> {
    let key = scope_key(scope);
    let runs = three_columns(
        pool,
        "SELECT minute, event, n FROM run_minutes WHERE namespace = $1 AND minute >= $2",
        &key,
        since_minute,
    )
    .await?;
    let steps = three_columns(
        pool,
        "SELECT minute, slot::BIGINT, n FROM step_minutes WHERE namespace = $1 AND minute >= $2",
        &key,
        since_minute,
    )
    .await?;
    Ok(minutes(runs, steps))
}

/// The rows of `sql`, a select of three columns bound to a namespace key and a first minute.
async fn three_columns<K>(
    pool: &PgPool,
    sql: &'static str,
    key: &str,
    since_minute: i64,
) -> StoreResult<Vec<(i64, K, i64)>>
where
    K: for<'r> sqlx::Decode<'r, sqlx::Postgres> + sqlx::Type<sqlx::Postgres>,
{
    let corrupt = |e: sqlx::Error| StoreError::Corrupt(e.to_string());
    let rows = sqlx::query(sql)
        .bind(key)
        .bind(since_minute)
        .fetch_all(pool)
        .await
        .map_err(db)?;
    rows.iter()
        .map(|row| {
            Ok((
                row.try_get(0).map_err(corrupt)?,
                row.try_get(1).map_err(corrupt)?,
                row.try_get(2).map_err(corrupt)?,
            ))
        })
        .collect()
}

pub(super) async fn add_step_tallies(pool: &PgPool, tallies: &[StepTally]) -> StoreResult<()> {
    let rows = step_rows(tallies);
    // One transaction, so a failure adds nothing and the engine's retry adds it all once.
    let mut tx = pool.begin().await.map_err(db)?;
    // A few hundred rows a statement keeps each one's binds well under PostgreSQL's limit.
    for chunk in rows.chunks(500) {
        let mut sql = Sql::new("INSERT INTO step_minutes (namespace, minute, slot, n) ");
        sql.push_values(chunk, |mut row, (namespace, minute, slot, n)| {
            row.push_bind(namespace.clone())
                .push_bind(*minute)
                .push_bind(*slot as i16)
                .push_bind(*n);
        });
        sql.push(
            " ON CONFLICT (namespace, minute, slot) DO UPDATE SET n = step_minutes.n + EXCLUDED.n",
        );
        sql.build().execute(&mut *tx).await.map_err(db)?;
    }
    tx.commit().await.map_err(db)?;
    Ok(())
}

/// Deletes the minutes before `before_minute`; one engine at a time (the others return 0 at
/// once), so a cluster's engines never delete the same rows together.
pub(super) async fn prune_activity(pool: &PgPool, before_minute: i64) -> StoreResult<u64> {
    let mut tx = pool.begin().await.map_err(db)?;
    let mine: bool =
        sqlx::query_scalar("SELECT pg_try_advisory_xact_lock(hashtext('durable.prune_activity'))")
            .fetch_one(&mut *tx)
            .await
            .map_err(db)?;
    if !mine {
        return Ok(0);
    }
    let mut gone = 0;
    for table in ["run_minutes", "step_minutes"] {
        let done = sqlx::query(&format!("DELETE FROM {table} WHERE minute < $1"))
            .bind(before_minute)
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        gone += done.rows_affected();
    }
    tx.commit().await.map_err(db)?;
    Ok(gone)
}
