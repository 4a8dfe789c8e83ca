//! Group commit: the hot writes (starts, turns, step results) of many runs share transactions.
//!
//! A PostgreSQL commit waits for its WAL flush, and this is most of a small write's cost: one
//! transaction per run change caps a control plane at the disk's flush rate, however many runs
//! are in flight. Here a few lanes each take whatever writes are queued, run them one after the
//! other in one transaction (each inside a savepoint, so a write that backs out or fails never
//! undoes its neighbours) and answer every caller only once that transaction committed. A lone
//! write still commits at once: nothing waits for a batch to fill.
//!
//! A write that is one statement (see [`Writer::write_as`]) and finds the lane idle
//! runs on its own, without `BEGIN` and `COMMIT`: its statement commits itself, so it costs one
//! round trip instead of three, which is most of a lone write's latency.
//!
//! Writes of one kind that can share a statement (see [`Writer::write_merged`]) do: the
//! step results of a burst's runs, say, are one `UPDATE … FROM unnest(…)` rather than one
//! statement each. PostgreSQL spends most of a small write's CPU on the statement around it
//! (planning, executor start-up, its own round of locks), so this is what lets a few cores keep up
//! with thousands of runs. Such a statement never backs a write out after writing it: a write it
//! cannot apply is simply not written, and answered as its one-write body would answer it.
//!
//! A savepoint costs a round trip per write, and almost every write keeps its changes, so a batch
//! first runs without them: if every write keeps its changes, that transaction commits; if one
//! backs out or fails, it is rolled back and the batch runs again with a savepoint per write.
//!
//! Lanes run concurrently, each on a connection of its own that it keeps between batches (taking
//! one from the pool per batch would cost a health-check round trip each time), so the same run
//! can be written by two lanes at once; its row lock orders them. A lane whose transaction fails
//! drops its connection and takes a fresh one for the next batch. A write that loses a deadlock
//! (or a serialization check) to another lane is run again on its own after its batch committed.
//! Each write wakes the lane that went idle last (see [`queue`]), so writes that come one
//! at a time all reach the same warm backend, and lanes take queued writes fairly between
//! tenants.

mod batch;
mod job;
mod queue;

use std::sync::Arc;

use sqlx::pool::PoolConnection;
use sqlx::{PgPool, Postgres};
use tokio::sync::oneshot;

pub(super) use self::job::{Body, MergedBody};
use self::job::{Job, Merge, Outcome, Queued};
use self::queue::{Queue, Taker};
use super::rows::db;
use crate::fair::Lane;
use crate::store::StoreError;

/// How many ordinary lanes (transactions in flight at once), besides the express lane (see
/// [`queue`]). More lanes overlap more round trips; each keeps one pooled connection.
pub(super) const LANES: usize = 4;

/// The most writes in one transaction. Each write's savepoint is a subtransaction, and
/// PostgreSQL tracks up to 64 of them per transaction cheaply.
const MAX_BATCH: usize = 48;

/// The queue the lanes take writes from. Cloning shares the lanes, which stop when every clone
/// is dropped.
#[derive(Clone)]
pub(super) struct Writer {
    jobs: Arc<Queue<Box<dyn Job>>>,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer")
            .field("queued", &self.jobs.len())
            .finish()
    }
}

impl Writer {
    /// Starts [`LANES`] lanes and the express lane writing through `pool`.
    pub(super) fn start(pool: &PgPool) -> Self {
        let (jobs, takers) = queue::queue::<Box<dyn Job>>(LANES);
        for taker in takers {
            tokio::spawn(lane(pool.clone(), taker));
        }
        Writer {
            jobs: Arc::new(jobs),
        }
    }

    /// Runs `body(conn, &args)` in the next group transaction; answers once that committed.
    /// `body` returns `None` to back its changes out (they are rolled back, the others stay).
    pub(super) async fn write<A, T, F>(&self, args: A, body: F) -> Outcome<T>
    where
        A: Send + Sync + 'static,
        T: Send + 'static,
        F: Body<A, T>,
    {
        self.write_as(false, args, body).await
    }

    /// [`Writer::write`] for a write whose `body`, when `one_statement`, runs one
    /// statement that writes, then only reads, and returns `None` only when that statement
    /// wrote nothing. Run alone, such a write needs no transaction: the statement is atomic and
    /// commits itself.
    pub(super) async fn write_as<A, T, F>(
        &self,
        one_statement: bool,
        args: A,
        body: F,
    ) -> Outcome<T>
    where
        A: Send + Sync + 'static,
        T: Send + 'static,
        F: Body<A, T>,
    {
        self.send(one_statement, None, args, body).await
    }

    /// [`Writer::write_as`] for a write that, when `mergeable` (it is one statement), may
    /// share its statement with other writes queued through the same call: `merged` applies
    /// many such writes' `args` in one statement that writes, then only reads, and writes
    /// nothing for a write it does not apply. Writes with the same `key` are never merged
    /// together. A lone write, one not `mergeable`, or a batch whose merged statement failed,
    /// runs `body`.
    pub(super) async fn write_merged<A, T, F>(
        &self,
        mergeable: bool,
        merged: MergedBody<A, T>,
        key: fn(&A) -> &str,
        args: A,
        body: F,
    ) -> Outcome<T>
    where
        A: Send + Sync + 'static,
        T: Send + 'static,
        F: Body<A, T>,
    {
        let merge = mergeable.then_some(Merge { body: merged, key });
        self.send(mergeable, merge, args, body).await
    }

    async fn send<A, T, F>(
        &self,
        one_statement: bool,
        merge: Option<Merge<A, T>>,
        args: A,
        body: F,
    ) -> Outcome<T>
    where
        A: Send + Sync + 'static,
        T: Send + 'static,
        F: Body<A, T>,
    {
        let (reply, answer) = oneshot::channel();
        let job = Queued {
            one_statement,
            merge,
            args,
            body,
            outcome: None,
            reply,
        };
        self.jobs
            .push(Lane::current(), Box::new(job))
            .map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }
}

/// One lane: takes the next write and whatever else is queued behind it, commits them together.
async fn lane(pool: PgPool, jobs: Taker<Box<dyn Job>>) {
    let mut conn: Option<PoolConnection<Postgres>> = None;
    while let Some(first) = jobs.next().await {
        let mut batch = Vec::with_capacity(MAX_BATCH);
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match jobs.try_next() {
                Some(job) => batch.push(job),
                None => break,
            }
        }
        let held = match conn.take() {
            Some(held) => held,
            None => match pool.acquire().await {
                Ok(fresh) => fresh,
                Err(e) => {
                    let why = db(e).to_string();
                    tracing::warn!(error = %why, writes = batch.len(), "no connection for a group write; its writes were not run");
                    for job in batch {
                        job.answer(Some(&why));
                    }
                    continue;
                }
            },
        };
        conn = batch::commit(held, batch).await;
    }
}

fn stopped() -> StoreError {
    StoreError::Unavailable("the store's group commit has stopped (its runtime shut down)".into())
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use futures::future::BoxFuture;
    use sqlx::PgConnection;

    use super::*;
    use crate::store::StoreResult;
    use crate::store::postgres::testing;

    static MERGED: AtomicUsize = AtomicUsize::new(0);

    /// Inserts every key in one statement, then fails to "read back" key `bad`.
    fn insert_all<'c>(
        conn: &'c mut PgConnection,
        keys: Vec<&'c String>,
    ) -> BoxFuture<'c, StoreResult<Vec<Outcome<String>>>> {
        MERGED.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            sqlx::query("INSERT INTO t (k) SELECT unnest($1::TEXT[])")
                .bind(keys.iter().map(|k| k.as_str()).collect::<Vec<_>>())
                .execute(&mut *conn)
                .await
                .map_err(db)?;
            Ok(keys
                .into_iter()
                .map(|k| match k.as_str() {
                    "bad" => Err(StoreError::Unavailable("its read back failed".into())),
                    _ => Ok(Some(k.clone())),
                })
                .collect())
        })
    }

    fn insert_one<'c>(
        conn: &'c mut PgConnection,
        key: &'c String,
    ) -> BoxFuture<'c, Outcome<String>> {
        Box::pin(async move {
            sqlx::query("INSERT INTO t (k) VALUES ($1)")
                .bind(key)
                .execute(&mut *conn)
                .await
                .map_err(db)?;
            Ok(Some(key.clone()))
        })
    }

    /// A merged statement that wrote stands: a write whose read after it failed hears that
    /// error, and no write is run a second time (which would find its own row and answer
    /// `Conflict`).
    #[tokio::test]
    async fn a_merged_statement_that_wrote_is_never_run_again() {
        let Some(url) = testing::fresh_database().await else {
            return;
        };
        let pool = PgPool::connect(&url).await.expect("connect");
        sqlx::query("CREATE TABLE t (k TEXT PRIMARY KEY)")
            .execute(&pool)
            .await
            .expect("table");
        let group = Writer::start(&pool);
        let keys = ["a", "b", "bad", "c", "d", "e"];
        fn key(k: &String) -> &str {
            k
        }
        let writes =
            keys.map(|k| group.write_merged(true, insert_all, key, k.to_owned(), insert_one));
        let outcomes = futures::future::join_all(writes).await;
        assert!(
            MERGED.load(Ordering::SeqCst) > 0,
            "the writes queued together shared a statement"
        );
        for (key, outcome) in keys.iter().zip(&outcomes) {
            match (*key, outcome) {
                ("bad", Err(StoreError::Unavailable(e))) => {
                    assert!(e.to_string().contains("read back"), "{e}");
                }
                (_, Ok(Some(k))) => assert_eq!(k, key),
                (key, other) => panic!("write {key} answered {other:?}"),
            }
        }
        let stored: Vec<String> = sqlx::query_scalar("SELECT k FROM t ORDER BY k")
            .fetch_all(&pool)
            .await
            .expect("read");
        assert_eq!(stored, ["a", "b", "bad", "c", "d", "e"]);
    }
}
