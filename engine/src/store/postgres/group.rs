//! Group commit: the hot writes (starts, turns, step results) of many runs share transactions.
//!
//! A PostgreSQL commit waits for its WAL flush, and this is most of a small write's cost: one
//! transaction per run change caps a control plane at the disk's flush rate, however many runs
//! are in flight. Here a few lanes each take whatever writes are queued, run them one after the
//! other in one transaction (each inside a savepoint, so a write that backs out or fails never
//! undoes its neighbours) and answer every caller only once that transaction committed. A lone
//! write still commits at once: nothing waits for a batch to fill.
//!
//! A write that is one statement (see [`GroupCommit::write_as`]) and finds the lane idle
//! runs on its own, without `BEGIN` and `COMMIT`: its statement commits itself, so it costs one
//! round trip instead of three, which is most of a lone write's latency.
//!
//! Writes of one kind that can share a statement (see [`GroupCommit::write_merged`]) do: the
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
//! Each write wakes the lane that went idle last (see [`super::queue`]), so writes that come one
//! at a time all reach the same warm backend.

use std::any::{Any, TypeId};
use std::collections::HashSet;
use std::sync::Arc;

use futures::future::BoxFuture;
use sqlx::pool::PoolConnection;
// A bare `&str` runs on the simple protocol, so one round trip may carry two statements.
use sqlx::{Connection, Executor, PgConnection, PgPool, Postgres};
use tokio::sync::oneshot;

use super::queue::{self, Queue, Taker};
use super::rows::db;
use crate::store::{StoreError, StoreResult};

/// How many lanes (transactions in flight at once). More lanes overlap more round trips; each
/// keeps one pooled connection.
pub(super) const LANES: usize = 4;

/// The most writes in one transaction. Each write's savepoint is a subtransaction, and
/// PostgreSQL tracks up to 64 of them per transaction cheaply.
const MAX_BATCH: usize = 48;

/// What a write's body computes: `Some` keeps its changes, `None` backs them out.
type Outcome<T> = StoreResult<Option<T>>;

/// A write's body: runs the write on a connection (inside a transaction unless it is one
/// statement run alone) and says whether it keeps its changes.
pub(super) trait Body<A, T>:
    for<'c> Fn(&'c mut PgConnection, &'c A) -> BoxFuture<'c, Outcome<T>> + Send + 'static
{
}

impl<A, T, F> Body<A, T> for F where
    F: for<'c> Fn(&'c mut PgConnection, &'c A) -> BoxFuture<'c, Outcome<T>> + Send + 'static
{
}

/// How one write went inside the batch's transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ran {
    /// Its changes stay.
    Keep,
    /// It backed out (a compare-and-set missed): its changes are rolled back.
    Discard,
    /// It failed: its changes are rolled back and its caller hears the error.
    Failed,
    /// It lost a deadlock or serialization check to a concurrent transaction: run it alone.
    Contended,
}

/// Runs many writes of one kind as one statement that writes, then only reads (see
/// [`GroupCommit::write_merged`]): each write's outcome, in order (`Ok(None)` for a write it did
/// not apply, which wrote nothing; an error for a write whose reads after the statement
/// failed), or why the statement failed (then nothing was written).
pub(super) type MergedBody<A, T> =
    for<'c> fn(&'c mut PgConnection, Vec<&'c A>) -> BoxFuture<'c, StoreResult<Vec<Outcome<T>>>>;

/// How a queued write may share a statement with others of its kind.
struct Merge<A, T> {
    body: MergedBody<A, T>,
    /// Two writes with the same key are never merged (one statement could not order them).
    key: fn(&A) -> &str,
}

/// Runs the writes of a merged group (all of one type) as one statement: whether every write's
/// reads after it succeeded, or why the statement failed (then nothing was written).
type MergedRun =
    for<'c> fn(&'c mut PgConnection, &'c mut [Box<dyn Job>]) -> BoxFuture<'c, StoreResult<bool>>;

/// A queued write, type-erased so one queue carries every kind.
trait Job: Send + Any {
    /// Whether the write is one statement that writes (reads may follow) and never backs out
    /// after writing, so that alone it needs no transaction.
    fn one_statement(&self) -> bool;
    /// The concrete type of the write, its merge runner and its merge key, if it may share a
    /// statement with other writes of its type.
    fn merge(&self) -> Option<(TypeId, MergedRun, &str)>;
    /// The write as `Any`, for its merge runner.
    fn as_any(&self) -> &dyn Any;
    /// The write as `Any`, for its merge runner to keep its outcome.
    fn as_any_mut(&mut self) -> &mut dyn Any;
    /// Runs the write on `conn`, inside the open transaction, and keeps its outcome.
    fn run<'c>(&'c mut self, conn: &'c mut PgConnection) -> BoxFuture<'c, Ran>;
    /// Answers the caller: with its outcome, or with `failure` if the transaction did not
    /// commit (a write that backed out changed nothing either way).
    fn answer(self: Box<Self>, failure: Option<&str>);
}

struct Queued<A, T, F> {
    one_statement: bool,
    merge: Option<Merge<A, T>>,
    args: A,
    body: F,
    outcome: Option<Outcome<T>>,
    reply: oneshot::Sender<Outcome<T>>,
}

/// [`MergedRun`] for writes of type `Queued<A, T, F>`: gathers their arguments, runs their
/// merged body once and keeps each one's outcome.
fn run_merged<'c, A, T, F>(
    conn: &'c mut PgConnection,
    jobs: &'c mut [Box<dyn Job>],
) -> BoxFuture<'c, StoreResult<bool>>
where
    A: Send + Sync + 'static,
    T: Send + 'static,
    F: Body<A, T>,
{
    Box::pin(async move {
        fn of<Q: 'static>(job: &dyn Job) -> Option<&Q> {
            job.as_any().downcast_ref::<Q>()
        }
        let of = of::<Queued<A, T, F>>;
        let (Some(body), true) = (
            jobs.first()
                .and_then(|job| of(&**job))
                .and_then(|q| q.merge.as_ref())
                .map(|m| m.body),
            jobs.iter().all(|job| of(&**job).is_some()),
        ) else {
            return Err(StoreError::Unavailable(
                "a merged write group mixed kinds of write (a bug)".into(),
            ));
        };
        let args: Vec<&A> = jobs
            .iter()
            .filter_map(|job| of(&**job))
            .map(|q| &q.args)
            .collect();
        let outcomes = body(conn, args).await?;
        if outcomes.len() != jobs.len() {
            return Err(StoreError::Corrupt(format!(
                "a merged write answered {} of its {} writes",
                outcomes.len(),
                jobs.len()
            )));
        }
        let mut read_back = true;
        for (job, outcome) in jobs.iter_mut().zip(outcomes) {
            read_back &= outcome.is_ok();
            if let Some(q) = job.as_any_mut().downcast_mut::<Queued<A, T, F>>() {
                q.outcome = Some(outcome);
            }
        }
        Ok(read_back)
    })
}

impl<A, T, F> Job for Queued<A, T, F>
where
    A: Send + Sync + 'static,
    T: Send + 'static,
    F: Body<A, T>,
{
    fn one_statement(&self) -> bool {
        self.one_statement
    }

    fn merge(&self) -> Option<(TypeId, MergedRun, &str)> {
        let merge = self.merge.as_ref()?;
        let run: MergedRun = run_merged::<A, T, F>;
        Some((TypeId::of::<Self>(), run, (merge.key)(&self.args)))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }

    fn run<'c>(&'c mut self, conn: &'c mut PgConnection) -> BoxFuture<'c, Ran> {
        Box::pin(async move {
            let outcome = (self.body)(conn, &self.args).await;
            let ran = match &outcome {
                Ok(Some(_)) => Ran::Keep,
                Ok(None) => Ran::Discard,
                Err(e) if is_contention(e) => Ran::Contended,
                Err(_) => Ran::Failed,
            };
            self.outcome = Some(outcome);
            ran
        })
    }

    fn answer(self: Box<Self>, failure: Option<&str>) {
        let outcome = match (self.outcome, failure) {
            (None, why) => Err(not_written(why.unwrap_or("it was never run"))),
            (Some(Ok(Some(_))), Some(why)) => Err(not_written(why)),
            (Some(outcome), _) => outcome,
        };
        // The caller may have stopped waiting; the write stands either way.
        let _ = self.reply.send(outcome);
    }
}

/// The queue the lanes take writes from. Cloning shares the lanes, which stop when every clone
/// is dropped.
#[derive(Clone)]
pub(super) struct GroupCommit {
    jobs: Arc<Queue<Box<dyn Job>>>,
}

impl std::fmt::Debug for GroupCommit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupCommit")
            .field("queued", &self.jobs.len())
            .finish()
    }
}

impl GroupCommit {
    /// Starts [`LANES`] lanes writing through `pool`.
    pub(super) fn start(pool: &PgPool) -> Self {
        let (jobs, takers) = queue::queue::<Box<dyn Job>>(LANES);
        for taker in takers {
            tokio::spawn(lane(pool.clone(), taker));
        }
        GroupCommit {
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

    /// [`GroupCommit::write`] for a write whose `body`, when `one_statement`, runs one
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

    /// [`GroupCommit::write_as`] for a write that, when `mergeable` (it is one statement), may
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
        self.jobs.push(Box::new(job)).map_err(|_| stopped())?;
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
        conn = commit(held, batch).await;
    }
}

/// Commits `batch` on `conn` and answers every write in it; writes that lost to a concurrent
/// transaction run again, each alone, afterwards. Gives the connection back unless a
/// transaction on it failed (it may be broken).
async fn commit(
    mut conn: PoolConnection<Postgres>,
    mut batch: Vec<Box<dyn Job>>,
) -> Option<PoolConnection<Postgres>> {
    let alone = batch.len() == 1;
    if alone && batch[0].one_statement() {
        let mut job = batch.remove(0);
        let ran = job.run(&mut conn).await;
        job.answer(None);
        // A failed statement may have been a broken connection.
        return (ran != Ran::Failed).then_some(conn);
    }
    let mut groups = arrange(&mut batch);
    if groups.first() == Some(&batch.len()) {
        // The whole batch is one statement, which commits itself. If it failed, it wrote
        // nothing, and the writes run one by one below. If it succeeded, it stands, and each
        // write hears its own outcome: an error for one whose reads after it failed, never a
        // second try (which would find its own write in the way).
        if let Ok(read_back) = run_groups(&mut conn, &mut batch, &groups).await {
            for job in batch {
                job.answer(None);
            }
            // A failed read may have been a broken connection.
            return read_back.then_some(conn);
        }
        groups.clear();
    }
    let ran = match run_optimistic(&mut conn, &mut batch, &groups).await {
        Ok(Some(ran)) => Ok(ran),
        Ok(None) => run_batch(&mut conn, &mut batch).await,
        Err(why) => Err(why),
    };
    let ran = match ran {
        Ok(ran) => ran,
        Err(why) => {
            tracing::warn!(error = %why, writes = batch.len(), "a group write transaction failed; its writes were rolled back");
            let why = why.to_string();
            for job in batch {
                job.answer(Some(&why));
            }
            return None;
        }
    };
    let mut again = Vec::new();
    for (job, ran) in batch.into_iter().zip(ran) {
        match ran {
            Ran::Contended if !alone => again.push(job),
            _ => job.answer(None),
        }
    }
    let mut healthy = true;
    for mut job in again {
        match run_batch(&mut conn, std::slice::from_mut(&mut job)).await {
            Ok(_) => job.answer(None),
            Err(why) => {
                healthy = false;
                job.answer(Some(&why.to_string()));
            }
        }
    }
    healthy.then_some(conn)
}

/// Puts the writes that share a statement first, each kind's together, and the others after
/// them; the lengths of those groups. A kind with one write queued, and a write whose key is
/// already in its kind's group, are not merged. (Reordering is safe: writes queued together were
/// sent concurrently, and a run's row lock orders any two that touch it.)
fn arrange(batch: &mut Vec<Box<dyn Job>>) -> Vec<usize> {
    let mut groups: Vec<(TypeId, Vec<Box<dyn Job>>)> = Vec::new();
    let mut keys: HashSet<(TypeId, String)> = HashSet::new();
    let mut singles = Vec::new();
    for job in batch.drain(..) {
        let kind = job
            .merge()
            .and_then(|(kind, _, key)| keys.insert((kind, key.to_owned())).then_some(kind));
        match (kind, groups.iter_mut().find(|(k, _)| Some(*k) == kind)) {
            (Some(_), Some((_, jobs))) => jobs.push(job),
            (Some(kind), None) => groups.push((kind, vec![job])),
            (None, _) => singles.push(job),
        }
    }
    let mut spans = Vec::new();
    let mut lone = Vec::new();
    for (_, jobs) in groups {
        if jobs.len() > 1 {
            spans.push(jobs.len());
            batch.extend(jobs);
        } else {
            lone.extend(jobs);
        }
    }
    batch.extend(lone);
    batch.extend(singles);
    spans
}

/// Runs the merged groups at the front of `batch` (of lengths `groups`), each as one statement:
/// whether every write's reads after its statement succeeded, or why a statement failed.
fn run_groups<'a>(
    conn: &'a mut PgConnection,
    batch: &'a mut [Box<dyn Job>],
    groups: &'a [usize],
) -> BoxFuture<'a, StoreResult<bool>> {
    Box::pin(async move {
        let mut start = 0;
        let mut read_back = true;
        for &len in groups {
            let jobs = &mut batch[start..start + len];
            start += len;
            if let Some((_, run, _)) = jobs[0].merge() {
                read_back &= run(&mut *conn, jobs).await?;
            }
        }
        Ok(read_back)
    })
}

/// Runs `batch` in one transaction without savepoints (its merged `groups` first, each as one
/// statement) and commits it if every write kept its changes or wrote nothing (a write its
/// merged statement did not apply, a one-statement write that backed out). `None` otherwise: the transaction was rolled back,
/// nothing was written, and the batch must run with savepoints ([`run_batch`]), one write at a
/// time. A lone write is left to `run_batch`.
fn run_optimistic<'a>(
    conn: &'a mut PgConnection,
    batch: &'a mut [Box<dyn Job>],
    groups: &'a [usize],
) -> BoxFuture<'a, Result<Option<Vec<Ran>>, StoreError>> {
    Box::pin(async move {
        if batch.len() == 1 {
            return Ok(None);
        }
        let mut tx = conn.begin().await.map_err(db)?;
        let merged: usize = groups.iter().sum();
        // Inside a transaction any failure rolls everything back, and the batch runs again.
        if !matches!(
            run_groups(&mut tx, &mut batch[..merged], groups).await,
            Ok(true)
        ) {
            tx.rollback().await.map_err(db)?;
            return Ok(None);
        }
        for job in batch[merged..].iter_mut() {
            match job.run(&mut tx).await {
                Ran::Keep => {}
                // A one-statement write that backs out wrote nothing: nothing to undo.
                Ran::Discard if job.one_statement() => {}
                _ => {
                    tx.rollback().await.map_err(db)?;
                    return Ok(None);
                }
            }
        }
        tx.commit().await.map_err(db)?;
        Ok(Some(vec![Ran::Keep; batch.len()]))
    })
}

/// Runs `batch` in one transaction; how each write went, or why the transaction failed (then
/// nothing in it was written). A lone write needs no savepoint: backing it out is rolling the
/// transaction back.
fn run_batch<'a>(
    conn: &'a mut PgConnection,
    batch: &'a mut [Box<dyn Job>],
) -> BoxFuture<'a, Result<Vec<Ran>, StoreError>> {
    // Boxed so the future is `Send` for `tokio::spawn` (sqlx's executors are higher-ranked).
    Box::pin(async move {
        let mut tx = conn.begin().await.map_err(db)?;
        let guarded = batch.len() > 1;
        let mut ran = Vec::with_capacity(batch.len());
        for (i, job) in batch.iter_mut().enumerate() {
            if guarded {
                // One round trip: the previous write's savepoint is folded into the transaction.
                let mark = if i == 0 {
                    "SAVEPOINT job"
                } else {
                    "RELEASE SAVEPOINT job; SAVEPOINT job"
                };
                (&mut *tx).execute(mark).await.map_err(db)?;
            }
            let this = job.run(&mut tx).await;
            if guarded && this != Ran::Keep {
                (&mut *tx)
                    .execute("ROLLBACK TO SAVEPOINT job")
                    .await
                    .map_err(db)?;
            }
            ran.push(this);
        }
        if ran.contains(&Ran::Keep) {
            tx.commit().await.map_err(db)?;
        } else {
            tx.rollback().await.map_err(db)?;
        }
        Ok(ran)
    })
}

/// Whether `e` is PostgreSQL refusing one write because of a concurrent one (a deadlock or a
/// serialization failure), which the same write run again on its own gets past.
fn is_contention(e: &StoreError) -> bool {
    let StoreError::Unavailable(source) = e else {
        return false;
    };
    source
        .downcast_ref::<sqlx::Error>()
        .and_then(|e| e.as_database_error())
        .and_then(|d| d.code())
        .is_some_and(|code| code == "40P01" || code == "40001")
}

fn not_written(why: &str) -> StoreError {
    StoreError::Unavailable(format!("the write was not committed: {why}").into())
}

fn stopped() -> StoreError {
    StoreError::Unavailable("the store's group commit has stopped (its runtime shut down)".into())
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
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
        let group = GroupCommit::start(&pool);
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
