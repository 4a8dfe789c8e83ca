//! Consuming BullMQ queues: one task per subscription takes jobs from every queue it serves in
//! batches (one round trip each), then blocks on their marker keys until a producer (ours,
//! Node's or Python's) adds a job. Jobs are handed on as their raw JSON `data`; a slow receiver
//! slows the loop down (bounded channel).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use super::Shared;
use crate::transport::naming::bull_key;

/// The most jobs taken in one round trip.
const BATCH: usize = 32;
/// How long one blocking wait for a marker lasts; also how soon a dropped subscription stops.
const BLOCK_SECS: f64 = 2.0;
/// Jobs taken but not yet handed over. Small: a crash loses at most these (and one batch),
/// which the engine's lost-dispatch redispatch then sends again.
const BUFFER: usize = 64;

/// Starts consuming `queues`; the job data arrives on the returned channel. The task stops when
/// the receiver is dropped.
pub(super) fn spawn(shared: Arc<Shared>, mut queues: Vec<String>) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel(BUFFER);
    tokio::spawn(async move {
        let markers: Vec<String> = queues.iter().map(|q| bull_key(q, "marker")).collect();
        let mut backoff = Duration::from_millis(100);
        'connect: loop {
            if tx.is_closed() {
                return;
            }
            let mut conn = match shared.blocking_connection().await {
                Ok(conn) => conn,
                Err(e) => {
                    tracing::warn!(error = %e, queues = ?queues, "cannot reach Redis to consume; retrying");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                    continue 'connect;
                }
            };
            backoff = Duration::from_millis(100);
            loop {
                if tx.is_closed() {
                    return;
                }
                // Start at the next queue each time, so a busy queue cannot starve the others.
                if !queues.is_empty() {
                    queues.rotate_left(1);
                }
                let jobs = match shared.scripts.take(&mut conn, &queues, BATCH).await {
                    Ok(jobs) => jobs,
                    Err(e) => {
                        tracing::warn!(error = %e, queues = ?queues, "taking jobs failed; reconnecting");
                        continue 'connect;
                    }
                };
                // A short batch drained every queue: a job added since set a marker.
                let drained = jobs.len() < BATCH;
                for data in jobs {
                    if tx.send(data).await.is_err() {
                        return;
                    }
                }
                if drained {
                    // Wakes on any queue's marker; stale markers only cause an extra drain.
                    let woke: redis::RedisResult<redis::Value> = redis::cmd("BZPOPMIN")
                        .arg(&markers)
                        .arg(BLOCK_SECS)
                        .query_async(&mut conn)
                        .await;
                    if let Err(e) = woke {
                        tracing::warn!(error = %e, "waiting for jobs failed; reconnecting");
                        continue 'connect;
                    }
                }
            }
        }
    });
    rx
}
