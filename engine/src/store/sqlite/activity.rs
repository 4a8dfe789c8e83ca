//! The activity minutes' statements: runs started and finished are counted by the triggers of
//! `migrations/sqlite/0025_activity.sql`; step tallies are added here, on the writer thread.

use rusqlite::Connection;

use super::rows::col;
use super::sql::{Sql, db};
use super::writer::Wrote;
use crate::model::{ActivityMinute, Scope, StepTally};
use crate::store::StoreResult;
use crate::store::rules::activity::{minutes, scope_key, step_rows};

pub(super) fn activity(
    conn: &Connection,
    scope: &Scope,
    since_minute: i64,
) -> StoreResult<Vec<ActivityMinute>> {
    let key = scope_key(scope);
    let mut runs = Sql::new("SELECT minute, event, n FROM run_minutes WHERE namespace = ");
    runs.bind(key.clone())
        .push(" AND minute >= ")
        .bind(since_minute);
    let runs = runs.all(conn, |row| {
        Ok((col(row, "minute")?, col(row, "event")?, col(row, "n")?))
    })?;
    let mut steps = Sql::new("SELECT minute, slot, n FROM step_minutes WHERE namespace = ");
    steps.bind(key).push(" AND minute >= ").bind(since_minute);
    let steps = steps.all(conn, |row| {
        Ok((col(row, "minute")?, col(row, "slot")?, col(row, "n")?))
    })?;
    Ok(minutes(runs, steps))
}

pub(super) fn add_step_tallies(conn: &Connection, tallies: &[StepTally]) -> StoreResult<Wrote<()>> {
    let mut stmt = conn
        .prepare_cached(
            "INSERT INTO step_minutes (namespace, minute, slot, n) VALUES (?, ?, ?, ?) \
             ON CONFLICT (namespace, minute, slot) DO UPDATE SET n = n + excluded.n",
        )
        .map_err(db)?;
    for (namespace, minute, slot, n) in step_rows(tallies) {
        stmt.execute(rusqlite::params![namespace, minute, slot, n])
            .map_err(db)?;
    }
    Ok(Wrote::Keep(()))
}

pub(super) fn prune_activity(conn: &Connection, before_minute: i64) -> StoreResult<Wrote<u64>> {
    let mut gone = 0;
    for table in ["run_minutes", "step_minutes"] {
        let mut sql = Sql::new(format!("DELETE FROM {table} WHERE minute < "));
        sql.bind(before_minute);
        gone += sql.execute(conn)?;
    }
    Ok(Wrote::Keep(gone))
}
