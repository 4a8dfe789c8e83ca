//! Group commit: every write of one store goes through a single thread that owns the write
//! connection and commits whatever writes are queued together in one transaction.
//!
//! SQLite has one writer, and most of a small write's cost is the transaction around it. Under
//! load many turns, results and starts are queued at once; committing them together turns N
//! transactions into one, while a lone write still commits at once (nothing waits for a batch
//! to fill). Each write runs inside its own savepoint, so one write that fails or backs out (a
//! compare-and-set that missed) never undoes its neighbours, and no caller hears "done" before
//! the transaction committed. The thread calls SQLite directly: a statement costs microseconds,
//! with one hand-off per write rather than one per statement.

use std::future::Future;

use futures::FutureExt;
use rusqlite::Connection;
use tokio::sync::oneshot;

use crate::store::{StoreError, StoreResult};

/// The most writes committed in one transaction; bounds how long one commit holds the lock.
const MAX_BATCH: usize = 512;

/// What a write decided about its own changes.
pub(super) enum Wrote<T> {
    /// Keep them; answer `T`.
    Keep(T),
    /// Undo them (a compare-and-set found the row moved on); answer `T`.
    Discard(T),
}

impl<T> Wrote<Option<T>> {
    /// Keeps the changes of a write that answers `Some`, undoes those of one that answers
    /// `None` (a shared flow's "back it out").
    pub(super) fn unless_none(answer: Option<T>) -> Self {
        match answer {
            Some(_) => Wrote::Keep(answer),
            None => Wrote::Discard(None),
        }
    }
}

/// Runs a shared flow of `crate::store::plan` on this store's connection. SQLite's statements
/// never wait, so the flow ends in its first poll.
pub(super) fn at_once<T>(flow: impl Future<Output = T>) -> T {
    flow.now_or_never()
        .expect("a flow of SQLite statements never waits")
}

/// A queued write, type-erased so one queue carries every kind.
trait Job: Send {
    /// Runs the write inside the open transaction.
    fn run(self: Box<Self>, conn: &mut Connection) -> Ran;
    /// Answers the caller that the write was never run.
    fn refuse(self: Box<Self>, why: &str);
}

/// Answers a job's caller once the batch's fate is known: `Some(why)` if the commit failed.
type Answer = Box<dyn FnOnce(Option<&str>) + Send>;

/// A job that ran: whether to keep its changes, and how to answer its caller.
struct Ran {
    keep: bool,
    answer: Answer,
}

struct Queued<T, F> {
    body: F,
    reply: oneshot::Sender<StoreResult<T>>,
}

impl<T, F> Job for Queued<T, F>
where
    T: Send + 'static,
    F: FnOnce(&mut Connection) -> StoreResult<Wrote<T>> + Send + 'static,
{
    fn run(self: Box<Self>, conn: &mut Connection) -> Ran {
        let Queued { body, reply } = *self;
        let outcome = body(conn);
        let keep = matches!(outcome, Ok(Wrote::Keep(_)));
        let answer: Answer = Box::new(move |commit_error: Option<&str>| {
            let answer = match (outcome, commit_error) {
                (Err(e), _) => Err(e),
                (Ok(Wrote::Keep(_)), Some(e)) => Err(not_written(e)),
                // Backed out, so a failed commit changes nothing for it.
                (Ok(Wrote::Keep(v) | Wrote::Discard(v)), _) => Ok(v),
            };
            // The caller may have stopped waiting; the write stands either way.
            let _ = reply.send(answer);
        });
        Ran { keep, answer }
    }

    fn refuse(self: Box<Self>, why: &str) {
        let _ = self.reply.send(Err(not_written(why)));
    }
}

/// The sending side of the writer thread. Cloning shares the one thread, which ends when every
/// clone is dropped.
#[derive(Clone)]
pub(super) struct Writer {
    jobs: flume::Sender<Box<dyn Job>>,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer")
            .field("queued", &self.jobs.len())
            .finish()
    }
}

impl Writer {
    /// Starts the writer thread on `conn`.
    pub(super) fn start(mut conn: Connection) -> StoreResult<Self> {
        let (jobs, rx) = flume::unbounded();
        std::thread::Builder::new()
            .name("durable-sqlite-writer".into())
            .spawn(move || run(&mut conn, &rx))
            .map_err(|e| StoreError::Unavailable(Box::new(e)))?;
        Ok(Writer { jobs })
    }

    /// Runs `body` in the next group transaction and answers once that has committed.
    pub(super) async fn write<T, F>(&self, body: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> StoreResult<Wrote<T>> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        self.jobs
            .send(Box::new(Queued { body, reply }))
            .map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }
}

fn stopped() -> StoreError {
    StoreError::Unavailable("the store's writer has stopped (the store was shut down)".into())
}

fn not_written(why: &str) -> StoreError {
    StoreError::Unavailable(format!("the write was not committed: {why}").into())
}

fn run(conn: &mut Connection, rx: &flume::Receiver<Box<dyn Job>>) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while let Some(first) = super::readers::next_job(rx) {
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        commit_batch(conn, &mut batch);
    }
}

/// Runs `batch` in one transaction and answers every job. A lone job needs no savepoint: backing
/// it out is rolling the transaction back.
fn commit_batch(conn: &mut Connection, batch: &mut Vec<Box<dyn Job>>) {
    let alone = batch.len() == 1;
    if let Err(e) = conn.execute_batch("BEGIN IMMEDIATE") {
        let why = e.to_string();
        tracing::warn!(error = %why, "could not begin a write transaction");
        for job in batch.drain(..) {
            job.refuse(&why);
        }
        return;
    }
    let mut answers = Vec::with_capacity(batch.len());
    let mut any_kept = false;
    let mut broken: Option<String> = None;
    for job in batch.drain(..) {
        if let Some(why) = &broken {
            job.refuse(why);
            continue;
        }
        if !alone && let Err(e) = conn.execute_batch("SAVEPOINT job") {
            let why = e.to_string();
            job.refuse(&why);
            broken = Some(why);
            continue;
        }
        let ran = job.run(conn);
        if !alone {
            let end = if ran.keep {
                conn.execute_batch("RELEASE job")
            } else {
                conn.execute_batch("ROLLBACK TO job; RELEASE job")
            };
            if let Err(e) = end {
                broken = Some(e.to_string());
            }
        }
        any_kept |= ran.keep;
        answers.push(ran);
    }
    let end = match (&broken, any_kept) {
        (None, true) => conn.execute_batch("COMMIT").map_err(|e| e.to_string()),
        (None, false) => conn.execute_batch("ROLLBACK").map_err(|e| e.to_string()),
        (Some(e), _) => Err(e.clone()),
    };
    let error = match end {
        Ok(()) => None,
        Err(e) => {
            tracing::warn!(error = %e, "a group write transaction failed; its writes were rolled back");
            if let Err(rb) = conn.execute_batch("ROLLBACK") {
                tracing::debug!(error = %rb, "rollback after a failed commit");
            }
            Some(e)
        }
    };
    for ran in answers {
        (ran.answer)(error.as_deref());
    }
}
