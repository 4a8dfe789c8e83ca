//! A queued write: what it carries, how it runs inside a batch's transaction, how writes of one
//! kind share a statement, and how it answers its caller.

use std::any::{Any, TypeId};

use futures::future::BoxFuture;
use sqlx::PgConnection;
use tokio::sync::oneshot;

use crate::store::{StoreError, StoreResult};

/// What a write's body computes: `Some` keeps its changes, `None` backs them out.
pub(super) type Outcome<T> = StoreResult<Option<T>>;

/// A write's body: runs the write on a connection (inside a transaction unless it is one
/// statement run alone) and says whether it keeps its changes.
pub(in crate::store::postgres) trait Body<A, T>:
    for<'c> Fn(&'c mut PgConnection, &'c A) -> BoxFuture<'c, Outcome<T>> + Send + 'static
{
}

impl<A, T, F> Body<A, T> for F where
    F: for<'c> Fn(&'c mut PgConnection, &'c A) -> BoxFuture<'c, Outcome<T>> + Send + 'static
{
}

/// How one write went inside the batch's transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Ran {
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
pub(in crate::store::postgres) type MergedBody<A, T> =
    for<'c> fn(&'c mut PgConnection, Vec<&'c A>) -> BoxFuture<'c, StoreResult<Vec<Outcome<T>>>>;

/// How a queued write may share a statement with others of its kind.
pub(super) struct Merge<A, T> {
    pub(super) body: MergedBody<A, T>,
    /// Two writes with the same key are never merged (one statement could not order them).
    pub(super) key: fn(&A) -> &str,
}

/// Runs the writes of a merged group (all of one type) as one statement: whether every write's
/// reads after it succeeded, or why the statement failed (then nothing was written).
pub(super) type MergedRun =
    for<'c> fn(&'c mut PgConnection, &'c mut [Box<dyn Job>]) -> BoxFuture<'c, StoreResult<bool>>;

/// A queued write, type-erased so one queue carries every kind.
pub(super) trait Job: Send + Any {
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

pub(super) struct Queued<A, T, F> {
    pub(super) one_statement: bool,
    pub(super) merge: Option<Merge<A, T>>,
    pub(super) args: A,
    pub(super) body: F,
    pub(super) outcome: Option<Outcome<T>>,
    pub(super) reply: oneshot::Sender<Outcome<T>>,
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
