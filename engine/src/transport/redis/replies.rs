//! A control plane's own results queue (`P-results-<instance>`).
//!
//! A control plane names its own queue in every task it sends (`replyTo`), and our workers
//! answer there, so a result comes back to the control plane that holds its run's history in
//! memory: with several control planes on one Redis, none of them has to read a run back because
//! a peer sent its step. The SDK workers ignore the field and answer on the shared `P-results`,
//! which every control plane consumes as well.
//!
//! A result goes to the own queue only while its owner's liveness key
//! (`P-results-owner:<instance>`) exists, which the add script checks atomically with the add;
//! otherwise it goes to the shared queue. The owner renews the key while its consumer keeps up (a
//! control plane whose results loop is stuck lets it lapse, and its results flow to its peers
//! again), withdraws it when it stops consuming, and lists itself in `P-results-owners`. Every
//! live control plane looks through that list: the jobs left in a queue whose key is gone (a
//! crash, or results that came before the key lapsed) are moved to the shared queue inside
//! Redis, in one script that also forgets the queue once it is empty.

use std::sync::Arc;
use std::time::Duration;

use redis::{AsyncCommands, Script};
use tokio::sync::mpsc;

use super::Shared;
use crate::transport::naming::{
    reply_owner_key, reply_owners_key, reply_queue, results_queue, taken_key,
};

/// How often the owner renews its key and looks for queues that lost theirs.
#[cfg(not(test))]
const EVERY: Duration = Duration::from_secs(3);
#[cfg(test)]
const EVERY: Duration = Duration::from_millis(100);
/// How long the key outlives its last renewal.
#[cfg(not(test))]
const TTL: Duration = Duration::from_secs(10);
#[cfg(test)]
const TTL: Duration = Duration::from_millis(1000);
/// The most jobs one hand-over moves (a script blocks Redis while it runs).
const BATCH: usize = 256;

/// Deletes the key only if it still holds this subscription's token: a later subscription of
/// the same process may own it by now.
const WITHDRAW: &str = r#"
if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end
return 0
"#;

/// The own results queue of one subscription, kept alive while its consumer's channel is open.
pub(super) struct Owner {
    shared: Arc<Shared>,
    /// What this subscription writes in the key, so it never withdraws a later one's.
    token: String,
}

impl Owner {
    /// Sets the liveness key and lists the queue; from then on results may be sent to it.
    pub(super) async fn claim(shared: Arc<Shared>) -> redis::RedisResult<Self> {
        let owner = Owner {
            shared,
            token: uuid::Uuid::new_v4().simple().to_string(),
        };
        owner.renew(&mut owner.shared.conn.clone()).await?;
        Ok(owner)
    }

    /// Renews the key while `tx`, the channel its consumer fills, is open and not full, and
    /// hands over the queues that lost their key, every [`EVERY`]; withdraws the key once `tx`
    /// closes.
    pub(super) fn keep<T: Send + 'static>(self, tx: mpsc::Sender<T>) {
        tokio::spawn(async move {
            let mut conn = self.shared.conn.clone();
            loop {
                if let Err(e) = self.hand_over_lapsed(&mut conn).await {
                    tracing::debug!(error = %e, "moving the results of stopped control planes failed; trying again");
                }
                tokio::select! {
                    () = tx.closed() => break,
                    () = tokio::time::sleep(EVERY) => {}
                }
                // A full channel means nobody applies what the consumer takes: the key lapses
                // and results go where the other control planes take them.
                if tx.capacity() > 0
                    && let Err(e) = self.renew(&mut conn).await
                {
                    tracing::warn!(error = %e, "renewing this control plane's results queue failed; results go to the shared queue until it is renewed");
                }
            }
            let withdrawn: redis::RedisResult<i64> = Script::new(WITHDRAW)
                .key(reply_owner_key(&self.shared.p, &self.shared.instance))
                .arg(&self.token)
                .invoke_async(&mut conn)
                .await;
            if let Err(e) = withdrawn {
                tracing::debug!(error = %e, "withdrawing this control plane's results queue failed; it lapses on its own");
            }
        });
    }

    async fn renew(&self, conn: &mut redis::aio::ConnectionManager) -> redis::RedisResult<()> {
        let (p, me) = (&self.shared.p, &self.shared.instance);
        redis::pipe()
            .pset_ex(
                reply_owner_key(p, me),
                &self.token,
                u64::try_from(TTL.as_millis()).unwrap_or(u64::MAX),
            )
            .ignore()
            .sadd(reply_owners_key(p), me)
            .ignore()
            .query_async(conn)
            .await
    }

    /// Moves the jobs of every listed queue whose key is gone to the shared queue.
    async fn hand_over_lapsed(
        &self,
        conn: &mut redis::aio::ConnectionManager,
    ) -> redis::RedisResult<()> {
        let p = &self.shared.p;
        let owners_key = reply_owners_key(p);
        let owners: Vec<String> = conn.smembers(&owners_key).await?;
        let shared_queue = results_queue(p);
        for owner in owners.iter().filter(|o| **o != self.shared.instance) {
            let alive = reply_owner_key(p, owner);
            let own = reply_queue(p, owner);
            let mut moved = 0;
            while let Some(n) = self
                .shared
                .scripts
                .hand_over(
                    conn,
                    (&alive, &owners_key, owner, &taken_key(p, owner)),
                    &own,
                    &shared_queue,
                    BATCH,
                )
                .await?
            {
                moved += n;
                if n < BATCH {
                    break;
                }
            }
            if moved > 0 {
                tracing::info!(owner = %owner, results = moved, "moved the results a stopped control plane left to the shared queue");
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::redis::testing;

    /// The key lives while the consumer keeps up, lapses while its channel stays full (nobody
    /// applies what it takes), comes back once it keeps up again, and is withdrawn when the
    /// consumer stops.
    #[tokio::test]
    async fn the_key_lives_while_the_consumer_keeps_up() {
        let Some(transport) = testing::fresh_transport().await else {
            return;
        };
        let shared = transport.shared.clone();
        let key = reply_owner_key(&shared.p, &shared.instance);
        let conn = shared.conn.clone();
        let alive = || {
            let (mut conn, key) = (conn.clone(), key.clone());
            async move { conn.exists::<_, bool>(key).await.expect("exists") }
        };
        let owner = Owner::claim(shared.clone()).await.expect("claim");
        assert!(alive().await, "set before the queue is named anywhere");
        let (tx, mut rx) = mpsc::channel::<String>(1);
        owner.keep(tx.clone());
        tokio::time::sleep(TTL * 2).await;
        assert!(alive().await, "renewed while the consumer keeps up");
        tx.send("taken, not applied".into()).await.expect("fill");
        tokio::time::sleep(TTL * 2).await;
        assert!(!alive().await, "lapsed while the channel stayed full");
        rx.recv().await.expect("the job");
        tokio::time::sleep(EVERY * 10).await;
        assert!(alive().await, "renewed once the consumer keeps up again");
        drop(rx);
        // Well before the key would lapse on its own.
        tokio::time::sleep(EVERY * 3).await;
        assert!(!alive().await, "withdrawn once the consumer stopped");
    }
}
