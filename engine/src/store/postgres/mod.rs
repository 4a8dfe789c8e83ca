//! The PostgreSQL store: several control planes share one database.
//!
//! Semantically identical to the SQLite store (the same conformance suite runs on both): the
//! same namespace rules, compare-and-set transitions, leases and scoped reads. Each operation is
//! one transaction on a pooled connection; runs are claimed with `FOR UPDATE SKIP LOCKED`, so
//! control planes on one database drive disjoint sets of runs. The writes every run makes
//! (starts, turns, step results) are committed in groups ([`writer`]); reads and the other
//! writes use the pool directly.
//!
//! What both stores compute alike (a turn's commit, a result, settling a parent, a list's
//! filters) is `crate::store::rules`'s; the files here hold PostgreSQL's statements and I/O.
//! Each capability trait is implemented in its file, named as in `crate::store::api`, and each
//! of its methods runs the function of the same name in the file of its role, as the SQLite
//! store's do: a start, turn or step result through the group commit
//! (merged with others' by `merged/` when it can be), another write in a transaction of its own
//! (`in_tx!`), a read on the pool.
//!
//! Its files, by role (the SQLite store has a file of the same name for each):
//! - `writer/`: the group commit of starts, turns and step results;
//! - `turn.rs`: a turn's commit: its checkpoints, resolved waits, children, cancellations and
//!   the run's next status (`turns.rs` implements `Turns`, the writes every run makes, on it
//!   and on `result.rs`);
//! - `result.rs`: a step result, alone or with the turn it leads to;
//! - `settle.rs`: resolving waits: step retries, pending checkpoints, a parent's wait;
//! - `lifecycle.rs`: the statements of claims, leases, sweeps, dispatch beats, control verbs and
//!   signals, which `leases.rs`, `upkeep.rs`, `dispatches.rs` and `control.rs` implement their
//!   capabilities on;
//! - `reads.rs`: scoped reads (`RunReads`);
//! - `retention.rs`: deleting expired run families (`Retention`);
//! - `activity.rs`: the activity minutes the charts read;
//! - `accounts.rs`: dashboard users and settings;
//! - `rows.rs`: row mapping and the statements several operations share;
//! - `sql.rs`: building statements (`$n` placeholders).
//!
//! And only here: `fused.rs` (a turn's own write in one statement), `merged/` (many runs' writes
//! in one statement), `values.rs` (what a new run's and checkpoint's columns hold, bound for one
//! row or as arrays), `testing.rs`.

/// Runs `$body` (an async block using `$conn: &mut PgConnection`) in a transaction, committing
/// when it yields `Some`/a value and rolling back when an `Option` body yields `None`.
macro_rules! in_tx {
    ($pool:expr, |$conn:ident| $body:expr) => {{
        let mut tx = $pool.begin().await.map_err(db)?;
        let out = {
            let $conn: &mut sqlx::PgConnection = &mut tx;
            $body.await?
        };
        tx.commit().await.map_err(db)?;
        Ok(out)
    }};
    (optional $pool:expr, |$conn:ident| $body:expr) => {{
        let mut tx = $pool.begin().await.map_err(db)?;
        let out = {
            let $conn: &mut sqlx::PgConnection = &mut tx;
            $body.await?
        };
        match out {
            Some(out) => {
                tx.commit().await.map_err(db)?;
                Ok(Some(out))
            }
            None => {
                tx.rollback().await.map_err(db)?;
                Ok(None)
            }
        }
    }};
}

mod accounts;
mod activity;
mod connections;
mod control;
mod dispatches;
mod events;
mod fused;
mod leases;
mod lifecycle;
mod merged;
mod plans;
mod pools;
mod reads;
mod result;
mod retention;
mod rows;
mod schedules;
mod settle;
mod shared_pools;
mod sql;
#[cfg(any(test, feature = "test-util"))]
pub mod testing;
mod tokens;
mod turn;
mod turns;
mod upkeep;
mod values;
mod writer;

use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;

use self::writer::Writer;
use super::{StoreError, StoreResult};

/// The PostgreSQL [`Store`] and [`super::Accounts`].
#[derive(Clone, Debug)]
pub struct PgStore {
    pool: PgPool,
    /// Starts, turns and step results: the writes every run makes, committed in groups.
    writer: Writer,
}

impl PgStore {
    /// Connects to `url` (`postgres://…`) and applies the migrations.
    pub async fn connect(url: &str) -> StoreResult<Self> {
        let pool = PgPoolOptions::new()
            // Reads, the cold writes, and one connection per group-commit lane (and the
            // express lane).
            .max_connections(16 + writer::LANES as u32 + 1)
            .acquire_timeout(Duration::from_secs(10))
            .connect(url)
            .await
            .map_err(|e| StoreError::Unavailable(Box::new(e)))?;
        sqlx::migrate!("../migrations/postgres")
            .run(&pool)
            .await
            .map_err(|e| StoreError::Migrate(Box::new(e)))?;
        let writer = Writer::start(&pool);
        Ok(PgStore { pool, writer })
    }

    /// Runs raw SQL; for tests that plant legacy rows.
    #[cfg(any(test, feature = "test-util"))]
    pub async fn execute_raw(&self, sql: &str) -> StoreResult<u64> {
        Ok(sqlx::raw_sql(sql)
            .execute(&self.pool)
            .await
            .map_err(rows::db)?
            .rows_affected())
    }
}
