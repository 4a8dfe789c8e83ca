//! Consuming BullMQ queues: one task per subscription drains every queue it serves, then blocks
//! on their marker keys until a producer (ours, Node's or Python's) adds a job. Jobs are handed
//! on as their raw JSON `data`; a slow receiver slows the loop down (bounded channel).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use super::Shared;
use crate::transport::naming::bull_key;

/// Jobs taken from one queue before looking at the next, so a busy queue cannot starve others.
const BATCH: usize = 64;
/// How long one blocking wait for a marker lasts; also how soon a dropped subscription stops.
const BLOCK_SECS: f64 = 2.0;
/// Jobs taken but not yet handed over. Small: a crash loses at most these, which the engine's
/// lost-dispatch redispatch then sends again.
const BUFFER: usize = 64;

/// Starts consuming `queues`; the job data arrives on the returned channel. The task stops when
/// the receiver is dropped.
pub(super) fn spawn(shared: Arc<Shared>, queues: Vec<String>) -> mpsc::Receiver<String> {
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
                let mut took = false;
                for queue in &queues {
                    for _ in 0..BATCH {
                        match shared.scripts.take(&mut conn, queue).await {
                            Ok(Some(data)) => {
                                took = true;
                                if tx.send(data).await.is_err() {
                                    return;
                                }
                            }
                            Ok(None) => break,
                            Err(e) => {
                                tracing::warn!(error = %e, queue, "taking a job failed; reconnecting");
                                continue 'connect;
                            }
                        }
                    }
                }
                if !took {
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
