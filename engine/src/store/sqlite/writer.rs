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
//!
//! Queued writes are served fairly between tenants (each write in the [`Lane`] its caller set),
//! not in arrival order, and a transaction that has served a quiet tenant beside a busy one
//! commits early (see [`commit_next`]): under a busy tenant's load the writer runs one full
//! transaction after another, and a quiet tenant's write would otherwise wait for the rest of
//! the running one and then for a whole batch of the busy tenant's writes.

use std::collections::HashSet;
use std::future::Future;
use std::time::{Duration, Instant};

use futures::FutureExt;
use rusqlite::Connection;
use tokio::sync::oneshot;

use crate::fair::{FairQueue, Lane};
use crate::model::Namespace;
use crate::store::{StoreError, StoreResult};

/// The most writes committed in one transaction; bounds how long one commit holds the lock.
const MAX_BATCH: usize = 512;

/// How long a transaction that holds a quiet tenant's writes beside a busy tenant's runs at
/// least before it commits early (see [`commit_next`]). A commit costs about as much as a few
/// dozen writes (the pages it writes out), so committing after every quiet write would spend
/// the writer on commits; this bounds the share commits take at about half, and a quiet
/// tenant's wait at about this long.
const SHARED_COMMIT_AFTER: Duration = Duration::from_millis(2);

/// A queued write and the lane it waits in.
type Laned = (Lane, Box<dyn Job>);

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

/// Runs a shared flow of `crate::store::rules` on this store's connection. SQLite's statements
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
    jobs: flume::Sender<Laned>,
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
            .send((Lane::current(), Box::new(Queued { body, reply })))
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

/// The writes waiting for the writer, in line by tenant.
type Line = FairQueue<Namespace, String, Box<dyn Job>>;

/// Commits what is queued, a transaction at a time (see [`commit_next`]).
fn run(conn: &mut Connection, rx: &flume::Receiver<Laned>) {
    let mut waiting = Line::new();
    loop {
        if waiting.is_empty() {
            let Some(first) = super::readers::next_job(rx) else {
                return;
            };
            line_up(&mut waiting, first);
        }
        take_queued(rx, &mut waiting);
        commit_next(conn, &mut waiting, rx);
    }
}

/// Puts every write queued so far in line.
fn take_queued(rx: &flume::Receiver<Laned>, waiting: &mut Line) {
    while let Ok(next) = rx.try_recv() {
        line_up(waiting, next);
    }
}

/// Puts a queued write in line: fair between tenants, in arrival order within a key.
fn line_up(waiting: &mut Line, (lane, job): Laned) {
    waiting.set_weight(lane.tenant.clone(), lane.weight);
    waiting.push(lane.tenant, lane.key, 0, job);
}

/// Runs writes from `waiting` in one transaction, taken one at a time in fair order, and
/// answers each once it committed. A lone write needs no savepoint: backing it out is rolling
/// the transaction back.
///
/// The transaction takes up to [`MAX_BATCH`] writes, but commits early once it ran the last
/// waiting write of a tenant while it also holds another tenant's: a quiet tenant, with a write
/// or two in line, then waits for its turn in the fair order and a commit, rather than for a
/// full batch of a busy tenant's writes (a write that arrives while a transaction runs joins it
/// at its turn). A busy tenant alone still commits in full batches, beside the engine's own
/// writes too (the system lane: claims, lease renewals, results of runs the driver does not
/// hold), which come often and can wait for one batch.
fn commit_next(conn: &mut Connection, waiting: &mut Line, rx: &flume::Receiver<Laned>) {
    let alone = waiting.len() == 1;
    if let Err(e) = conn.execute_batch("BEGIN IMMEDIATE") {
        let why = e.to_string();
        tracing::warn!(error = %why, "could not begin a write transaction");
        for _ in 0..MAX_BATCH {
            match waiting.pop() {
                Some((_, _, job)) => job.refuse(&why),
                None => break,
            }
        }
        return;
    }
    let system = Namespace::system();
    // The tenants (not the system lane) whose writes this transaction holds.
    let mut holds: HashSet<Namespace> = HashSet::new();
    // Whether it ran a tenant's last waiting write beside another tenant's, and so should
    // commit as soon as it has run for `SHARED_COMMIT_AFTER`.
    let mut owed = false;
    let began = Instant::now();
    let mut answers = Vec::new();
    let mut any_kept = false;
    let mut broken: Option<String> = None;
    while answers.len() < MAX_BATCH {
        let Some((tenant, _, job)) = waiting.pop() else {
            break;
        };
        if !alone && let Err(e) = conn.execute_batch("SAVEPOINT job") {
            let why = e.to_string();
            job.refuse(&why);
            broken = Some(why);
            break;
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
        take_queued(rx, waiting);
        if tenant != system {
            owed |= !waiting.holds(&tenant) && holds.iter().any(|other| *other != tenant);
            holds.insert(tenant);
        }
        if alone || broken.is_some() || (owed && began.elapsed() >= SHARED_COMMIT_AFTER) {
            break;
        }
    }
    crate::metrics::batch_written("sqlite", answers.len());
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

#[cfg(test)]
mod tests;
