//! The SQLite store: the embedded default.
//!
//! Every write goes through one thread that owns the write connection and group-commits
//! whatever is queued ([`writer`]), so the process never contends with itself for SQLite's write
//! lock and a burst of small writes shares one transaction. Reads run on a few reader threads
//! ([`readers`]); WAL mode lets them read while the writer commits. Both call SQLite in-thread
//! (rusqlite): one hand-off per operation, not one per statement. Migrations are sqlx's, shared
//! with `durable migrate`.
//!
//! What both stores compute alike (a turn's commit, a result, settling a parent, a list's
//! filters) is `crate::store::rules`'s; the files here hold SQLite's statements and I/O. Each
//! capability trait is implemented in its file, named as in `crate::store::api`, and each of its
//! methods runs the function of the same name in the file of its role, as the PostgreSQL
//! store's do: a write on the writer thread, a read on a reader.
//!
//! Its files, by role (the PostgreSQL store has a file of the same name for each):
//! - `writer.rs`: the group commit every write goes through (and `readers.rs`, the reads);
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
//! - `sql.rs`: building statements (`?` placeholders).

mod accounts;
mod activity;
mod connections;
mod control;
mod dispatches;
mod events;
mod leases;
mod lifecycle;
mod plans;
mod pools;
mod readers;
mod reads;
mod result;
mod retention;
mod rows;
mod schedules;
mod settle;
mod shared_pools;
mod sql;
mod tokens;
mod turn;
mod turns;
mod upkeep;
mod writer;

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqliteSynchronous};
use sqlx::{Connection as _, SqliteConnection};

use self::readers::Readers;
use self::writer::Writer;
use super::{StoreError, StoreResult};

/// How many reader threads (and read connections) a store keeps.
const READERS: usize = 3;

/// How long a connection waits for another process's write lock (the CLI, a second server).
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// The SQLite [`Store`] and [`super::Accounts`].
#[derive(Clone, Debug)]
pub struct SqliteStore {
    writer: Writer,
    readers: Readers,
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `url` (`sqlite://path/to/file.db`) and applies
    /// the migrations.
    pub async fn connect(url: &str) -> StoreResult<Self> {
        let options = SqliteConnectOptions::from_str(url)
            .map_err(|_| StoreError::UnsupportedUrl(url.to_owned()))?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(BUSY_TIMEOUT)
            .foreign_keys(true);
        let path = options.get_filename().to_path_buf();
        if let Some(dir) = path.parent()
            && !dir.as_os_str().is_empty()
        {
            std::fs::create_dir_all(dir).map_err(|e| StoreError::Unavailable(Box::new(e)))?;
        }
        let mut migrator = SqliteConnection::connect_with(&options)
            .await
            .map_err(|e| StoreError::Unavailable(Box::new(e)))?;
        sqlx::migrate!("../migrations/sqlite")
            .run(&mut migrator)
            .await
            .map_err(|e| StoreError::Migrate(Box::new(e)))?;
        migrator
            .close()
            .await
            .map_err(|e| StoreError::Unavailable(Box::new(e)))?;
        let writer = Writer::start(open(&path, false)?)?;
        let readers = Readers::start(
            (0..READERS)
                .map(|_| open(&path, true))
                .collect::<StoreResult<Vec<_>>>()?,
        )?;
        Ok(SqliteStore { writer, readers })
    }

    /// Runs raw SQL on the write connection; for tests that plant legacy rows.
    #[cfg(any(test, feature = "test-util"))]
    pub async fn execute_raw(&self, sql: &str) -> StoreResult<u64> {
        let sql = sql.to_owned();
        self.writer
            .write(move |conn| {
                let changed = conn.execute(&sql, []).map_err(sql::db)?;
                Ok(writer::Wrote::Keep(changed as u64))
            })
            .await
    }
}

/// Opens a connection to the migrated database at `path`.
fn open(path: &Path, read_only: bool) -> StoreResult<Connection> {
    let flags = if read_only {
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX
    } else {
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX
    };
    let fail = |e: rusqlite::Error| {
        let path: PathBuf = path.to_path_buf();
        StoreError::Unavailable(format!("opening {}: {e}", path.display()).into())
    };
    let conn = Connection::open_with_flags(path, flags).map_err(fail)?;
    conn.busy_timeout(BUSY_TIMEOUT).map_err(fail)?;
    conn.execute_batch("PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;")
        .map_err(fail)?;
    conn.set_prepared_statement_cache_capacity(64);
    Ok(conn)
}
