//! Consuming BullMQ queues: one task per subscription takes jobs from every queue it serves in
//! batches (one round trip each), then blocks on their marker keys until a producer (ours,
//! Node's or Python's) adds a job, with the next take queued behind the wait. Jobs are handed on
//! on with their keys; a slow receiver slows the loop down (bounded channel). A holding
//! consumer's jobs stay its own until settled (see [`super::holds`]): those it took but could
//! not hand on, because the receiver stopped, go back at once. Which queues a take looks at, in
//! which order and how many jobs it takes is its [`Order`]'s: [`Rotate`] for a fixed set, or a
//! shared pool's fair order (`super::shared_pools`).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use super::Shared;
use super::holds::Holds;
use super::queue::{Taken, Taker};
use crate::transport::naming::bull_key;

/// The most jobs taken in one round trip.
const BATCH: usize = 32;
/// How long one blocking wait for a marker lasts before the loop looks around (a reconnect, say).
const BLOCK_SECS: f64 = 2.0;
/// Jobs taken but not yet handed over. Small: a crash loses at most these (and one batch),
/// which the engine's lost-dispatch redispatch then sends again.
const BUFFER: usize = 64;

/// A channel for a consumer to hand its jobs on.
pub(super) fn channel() -> (mpsc::Sender<Taken>, mpsc::Receiver<Taken>) {
    mpsc::channel(BUFFER)
}

/// Which queues each take looks at, in which order, and how many jobs it takes at most.
pub(super) trait Order: Send + 'static {
    /// The next take's queues, in the order it looks at them, the markers a wait wakes on, and
    /// the most jobs it takes.
    fn next(&mut self) -> (&[String], &[String], usize);

    /// Notes the jobs the take took (by their keys, `bull:<queue>:<id>`).
    fn took(&mut self, _jobs: &[Taken]) {}
}

/// A fixed set of queues, each take starting at the next, so a busy queue cannot starve the
/// others; batches of [`BATCH`].
pub(super) struct Rotate {
    queues: Vec<String>,
    markers: Vec<String>,
}

impl Rotate {
    /// The order over `queues`.
    pub(super) fn new(queues: Vec<String>) -> Self {
        let markers = queues.iter().map(|q| bull_key(q, "marker")).collect();
        Rotate { queues, markers }
    }
}

impl Order for Rotate {
    fn next(&mut self) -> (&[String], &[String], usize) {
        if !self.queues.is_empty() {
            self.queues.rotate_left(1);
        }
        (&self.queues, &self.markers, BATCH)
    }
}

/// Starts consuming `queues`; the jobs go to `tx`, held until settled if `hold`. The task stops
/// when the receiver is dropped.
pub(super) fn spawn(shared: Arc<Shared>, queues: Vec<String>, tx: mpsc::Sender<Taken>, hold: bool) {
    spawn_in(shared, Rotate::new(queues), tx, hold);
}

/// [`spawn`] with the takes in `order`.
pub(super) fn spawn_in(
    shared: Arc<Shared>,
    mut order: impl Order,
    tx: mpsc::Sender<Taken>,
    hold: bool,
) {
    tokio::spawn(async move {
        if hold {
            let mut backoff = Duration::from_millis(100);
            while let Err(e) = Holds::start(&shared).await {
                if tx.is_closed() {
                    return;
                }
                tracing::warn!(error = %e, "cannot reach Redis to hold what this process takes; retrying");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(5));
            }
        }
        let takers = crate::transport::naming::takers_key(&shared.p);
        // Takes whose answer was lost and whose giving back failed: tried again after each take.
        let mut lost: Vec<String> = Vec::new();
        let mut backoff = Duration::from_millis(100);
        'connect: loop {
            if tx.is_closed() {
                return;
            }
            let mut conn = match shared
                .blocking_connection(Duration::from_secs_f64(BLOCK_SECS))
                .await
            {
                Ok(conn) => conn,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot reach Redis to consume; retrying");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                    continue 'connect;
                }
            };
            // The first take after (re)connecting does not wait: jobs may be queued already.
            let mut drained = false;
            loop {
                if tx.is_closed() {
                    return;
                }
                let (queues, markers, batch) = order.next();
                if queues.is_empty() {
                    // Nothing to serve yet (a shared pool whose grants are still being read).
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                }
                let token = uuid::Uuid::new_v4().simple().to_string();
                // Read before the take: a lapse noticed after it makes the take's copies suspect.
                let epoch = shared.holds.epoch();
                let taker = Taker {
                    taken: shared.holds.taken_key(),
                    takers: &takers,
                    instance: &shared.instance,
                    hold,
                    token: &token,
                };
                let taken = if drained {
                    // Wakes on any queue's marker (a stale one only costs an empty take), and
                    // takes in the same round trip.
                    let wait = shared
                        .scripts
                        .wait_and_take(&mut conn, markers, BLOCK_SECS, queues, batch, taker);
                    tokio::select! {
                        taken = wait => taken,
                        // Nobody wants jobs any more: returning drops this consumer's own
                        // connection, which closes it, and Redis discards the take queued
                        // behind the wait instead of taking jobs for no one, unless the wait
                        // had just ended: what that take holds is given back.
                        () = tx.closed() => {
                            if hold {
                                lost.push(token.clone());
                                release(&shared, &mut lost).await;
                            }
                            return;
                        }
                    }
                } else {
                    shared.scripts.take(&mut conn, queues, batch, taker).await
                };
                let jobs = match taken {
                    Ok(jobs) => jobs,
                    Err(e) => {
                        // The take may have run with its answer lost on the way.
                        if hold {
                            lost.push(token);
                            release(&shared, &mut lost).await;
                        }
                        // Waited out before reconnecting, and longer each time until a take
                        // succeeds: an error that persists (Redis still loading, a read-only
                        // replica after a failover) must not spin a connection per turn.
                        tracing::warn!(error = %e, queues = ?queues, "taking jobs failed; reconnecting");
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(Duration::from_secs(5));
                        continue 'connect;
                    }
                };
                backoff = Duration::from_millis(100);
                if !lost.is_empty() {
                    release(&shared, &mut lost).await;
                }
                // A short batch drained every queue: a job added since set a marker.
                drained = jobs.len() < batch;
                order.took(&jobs);
                let mut jobs = jobs.into_iter().map(|mut job| {
                    job.epoch = epoch;
                    job
                });
                while let Some(job) = jobs.next() {
                    if let Err(unsent) = tx.send(job).await {
                        if hold {
                            let rest = std::iter::once(unsent.0).chain(jobs);
                            shared.holds.give_back(rest.map(|t| (t.job, t.take)));
                        }
                        return;
                    }
                }
            }
        }
    });
}

/// Gives back what the `lost` takes hold (their answers never reached this consumer); those it
/// cannot give back yet stay in `lost`, to be tried again after the next take.
async fn release(shared: &Shared, lost: &mut Vec<String>) {
    let mut conn = shared.conn.clone();
    let mut failed = Vec::new();
    for token in lost.drain(..) {
        match shared.holds.release(&mut conn, &token).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(
                jobs = n,
                "gave back the jobs of a take whose answer was lost"
            ),
            Err(e) => {
                tracing::warn!(error = %e, "could not give back the jobs of a take whose answer was lost; trying again");
                failed.push(token);
            }
        }
    }
    *lost = failed;
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::transport::redis::testing;

    /// A consumer stopped while it waits takes nothing more: a job added afterwards stays
    /// queued for the other consumers.
    #[tokio::test]
    async fn a_stopped_consumer_leaves_later_jobs_queued() {
        let Some(transport) = testing::fresh_transport().await else {
            return;
        };
        let queue = format!("{}-stop", transport.prefix());
        let (tx, jobs) = channel();
        spawn(transport.shared.clone(), vec![queue.clone()], tx, false);
        // Let it drain the empty queue and start waiting, then stop it.
        tokio::time::sleep(Duration::from_millis(300)).await;
        drop(jobs);
        tokio::time::sleep(Duration::from_millis(300)).await;
        testing::add_raw_job(&transport, &queue, "task", "{}")
            .await
            .expect("add");
        tokio::time::sleep(Duration::from_millis(300)).await;
        let mut conn = transport.shared.conn.clone();
        let waiting: i64 = redis::cmd("LLEN")
            .arg(bull_key(&queue, "wait"))
            .query_async(&mut conn)
            .await
            .expect("llen");
        assert_eq!(waiting, 1, "the stopped consumer took the job");
    }

    /// A take that keeps failing (here the queue's wait key holds the wrong type) is tried
    /// again, backing off, for as long as it fails: once it can take again, the consumer
    /// delivers.
    #[tokio::test]
    async fn a_consumer_outlasts_an_error_that_persists() {
        let Some(transport) = testing::fresh_transport().await else {
            return;
        };
        let queue = format!("{}-broken", transport.prefix());
        let mut conn = transport.shared.conn.clone();
        let wait = bull_key(&queue, "wait");
        let _: () = redis::cmd("SET")
            .arg(&wait)
            .arg("not a list")
            .query_async(&mut conn)
            .await
            .expect("break the queue");
        let (tx, mut jobs) = channel();
        spawn(transport.shared.clone(), vec![queue.clone()], tx, false);
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let _: () = redis::cmd("DEL")
            .arg(&wait)
            .query_async(&mut conn)
            .await
            .expect("mend the queue");
        testing::add_raw_job(&transport, &queue, "task", "{\"n\":1}")
            .await
            .expect("add");
        let got = tokio::time::timeout(Duration::from_secs(15), jobs.recv()).await;
        let got = got.ok().flatten().map(|t| t.data);
        assert_eq!(got.as_deref(), Some("{\"n\":1}"));
    }
}
