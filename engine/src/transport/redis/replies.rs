//! A control plane's own results queue (`P-results-<instance>`).
//!
//! A control plane names its own queue in every task it sends (`replyTo`), and our workers
//! answer there, so a result comes back to the control plane that holds its run's history in
//! memory: with several control planes on one Redis, none of them has to read a run back from
//! the store because a peer sent its step. The SDK workers ignore the field and answer on the
//! shared `P-results`, which every control plane consumes as well.
//!
//! The queue lives as long as its owner says so: the owner keeps a liveness key
//! (`P-results-owner:<instance>`) and lists itself in `P-results-owners`. A result is added to
//! the queue only while that key exists, checked by the add script itself, so once a control
//! plane is gone (its key withdrawn at shutdown, or expired after a crash) no result enters its
//! queue again. What was left in it is taken by the next live control plane's sweep, which then
//! forgets the queue.

use std::sync::Arc;
use std::time::Duration;

use redis::AsyncCommands;
use tokio::sync::mpsc;

use super::Shared;
use crate::transport::naming::{bull_key, reply_owner_key, reply_owners_key, reply_queue};

/// How often the owner renews its key and sweeps its dead peers' queues.
const EVERY: Duration = Duration::from_secs(3);
/// How long the key outlives its last renewal: a control plane that stopped without
/// withdrawing it (a crash) has its results diverted to the shared queue after this long.
const TTL_SECS: u64 = 10;
/// The most jobs taken from a dead queue in one round trip.
const BATCH: usize = 64;

/// Keeps this transport's own results queue alive while `tx` is open, and hands `tx` whatever
/// was left in the queues of control planes that are gone. Withdraws the key once `tx` closes,
/// so a peer's sweep takes what arrives afterwards.
pub(super) fn keep(shared: Arc<Shared>, tx: mpsc::Sender<String>) {
    tokio::spawn(async move {
        let (p, me) = (shared.p.clone(), shared.instance.clone());
        let mut conn = shared.conn.clone();
        while !tx.is_closed() {
            let renewed: redis::RedisResult<()> = redis::pipe()
                .set_ex(reply_owner_key(&p, &me), 1, TTL_SECS)
                .ignore()
                .sadd(reply_owners_key(&p), &me)
                .ignore()
                .query_async(&mut conn)
                .await;
            if let Err(e) = renewed {
                tracing::warn!(error = %e, "renewing this control plane's results queue failed; its results go to the shared queue until it is renewed");
            }
            if let Err(e) = sweep(&shared, &mut conn, &tx).await {
                tracing::debug!(error = %e, "sweeping the results queues of stopped control planes failed; trying again");
            }
            tokio::select! {
                () = tx.closed() => break,
                () = tokio::time::sleep(EVERY) => {}
            }
        }
        let withdrawn: redis::RedisResult<()> = conn.del(reply_owner_key(&p, &me)).await;
        if let Err(e) = withdrawn {
            tracing::debug!(error = %e, "withdrawing this control plane's results queue failed; it expires on its own");
        }
    });
}

/// Takes every result left in the queue of a control plane whose key is gone, hands it to
/// `tx`, and forgets the queue once it is empty.
async fn sweep(
    shared: &Shared,
    conn: &mut redis::aio::ConnectionManager,
    tx: &mpsc::Sender<String>,
) -> redis::RedisResult<()> {
    let p = &shared.p;
    let owners: Vec<String> = conn.smembers(reply_owners_key(p)).await?;
    for owner in owners.iter().filter(|o| **o != shared.instance) {
        if conn.exists(reply_owner_key(p, owner)).await? {
            continue;
        }
        let queue = reply_queue(p, owner);
        let mut left = 0;
        loop {
            let taken = shared
                .scripts
                .take(conn, std::slice::from_ref(&queue), BATCH)
                .await?;
            let drained = taken.len() < BATCH;
            left += taken.len();
            for data in taken {
                if tx.send(data).await.is_err() {
                    // Nobody consumes here any more: what was taken is lost like any job
                    // taken before a stop, and its step is sent again (lost dispatch).
                    return Ok(());
                }
            }
            if drained {
                break;
            }
        }
        if left > 0 {
            tracing::info!(owner = %owner, results = left, "took the results a stopped control plane left");
        }
        // No result enters the queue without its key, so the queue stays empty from here.
        let keys = ["id", "events", "marker"].map(|k| bull_key(&queue, k));
        redis::pipe()
            .srem(reply_owners_key(p), owner)
            .ignore()
            .del(&keys)
            .ignore()
            .query_async::<()>(conn)
            .await?;
    }
    Ok(())
}
