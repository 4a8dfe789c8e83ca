//! The worker registry on Redis (aviary wire §6): a consuming process announces itself per token
//! with a liveness key and a descriptor key (TTL 35 s, refreshed every 10 s), and anyone can
//! list the live worker groups by scanning the liveness keys, or read the descriptors a token's
//! live workers announced.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use redis::AsyncCommands;
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};

use super::Shared;
use crate::model::{Millis, Scope, WorkerDescriptor, WorkerGroup};
use crate::transport::naming::{
    parse_worker_heartbeat_key, split_token, worker_descriptor_key, worker_heartbeat_key,
    worker_heartbeat_pattern,
};

/// How long an announcement lives without a refresh.
const TTL_SECS: u64 = 35;
/// How often it is refreshed.
const EVERY: Duration = Duration::from_secs(10);

/// Announces `descriptor` on every token of `tokens` until `alive` is closed (the consumer's
/// receiver was dropped), then withdraws it so dashboards stop counting this worker at once.
/// The tokens may change (a shared pool granted to one more tenant): a change is announced at
/// once.
pub(super) fn announce<T: Send + 'static>(
    shared: Arc<Shared>,
    tokens: watch::Receiver<Vec<String>>,
    descriptor: WorkerDescriptor,
    concurrency: usize,
    alive: mpsc::Sender<T>,
) {
    tokio::spawn(async move {
        let hash = descriptor.hash();
        let body = match serde_json::to_string(&descriptor) {
            Ok(body) => body,
            Err(e) => {
                tracing::error!(error = %e, "cannot serialize the worker descriptor");
                return;
            }
        };
        let mut conn = shared.conn.clone();
        let (mut tokens, mut watching) = (tokens, true);
        loop {
            let beat = json!({
                "ts": super::now_ms(),
                "status": { "runtime": "rust", "concurrency": { "mode": "fixed", "limit": concurrency } },
                "descriptorHash": hash,
            })
            .to_string();
            let now = tokens.borrow().clone();
            for token in &now {
                let written: redis::RedisResult<()> = redis::pipe()
                    .set_ex(
                        worker_heartbeat_key(&shared.p, token, &descriptor.instance_id),
                        &beat,
                        TTL_SECS,
                    )
                    .set_ex(
                        worker_descriptor_key(&shared.p, token, &descriptor.instance_id),
                        &body,
                        TTL_SECS,
                    )
                    .query_async(&mut conn)
                    .await;
                if let Err(e) = written {
                    tracing::warn!(error = %e, token, "announcing this worker failed; retrying next beat");
                }
            }
            let changed = async {
                // A fixed list's sender is gone: nothing will change, wait for the beat.
                if watching && tokens.changed().await.is_err() {
                    watching = false;
                }
                if !watching {
                    std::future::pending::<()>().await;
                }
            };
            tokio::select! {
                () = alive.closed() => break,
                () = tokio::time::sleep(EVERY) => {}
                () = changed => {}
            }
        }
        let last = tokens.borrow().clone();
        let keys: Vec<String> = last
            .iter()
            .flat_map(|t| {
                [
                    worker_heartbeat_key(&shared.p, t, &descriptor.instance_id),
                    worker_descriptor_key(&shared.p, t, &descriptor.instance_id),
                ]
            })
            .collect();
        let removed: redis::RedisResult<()> = conn.del(keys).await;
        if let Err(e) = removed {
            tracing::debug!(error = %e, "withdrawing this worker's announcement failed; it expires on its own");
        }
    });
}

/// When a liveness value says its writer was last seen: `{"ts": ms, …}` or a bare number
/// (below 1e12 it is seconds, wire §6.2).
pub(super) fn seen_at(value: &str) -> Option<Millis> {
    let parsed: Value = serde_json::from_str(value).ok()?;
    let ts = match &parsed {
        Value::Object(o) => o.get("ts")?.as_f64()?,
        Value::Number(n) => n.as_f64()?,
        _ => return None,
    };
    Some(if ts < 1e12 { ts * 1000.0 } else { ts } as Millis)
}

/// Every liveness key under the prefix with its value: `(token, instance, value)`.
pub(super) async fn liveness(shared: &Shared) -> redis::RedisResult<Vec<(String, String, String)>> {
    let keys = shared.scan(&worker_heartbeat_pattern(&shared.p)).await?;
    let mut conn = shared.conn.clone();
    let mut out = Vec::with_capacity(keys.len());
    for chunk in keys.chunks(200) {
        let values: Vec<Option<String>> =
            redis::cmd("MGET").arg(chunk).query_async(&mut conn).await?;
        for (key, value) in chunk.iter().zip(values) {
            if let (Some((token, instance)), Some(value)) =
                (parse_worker_heartbeat_key(&shared.p, key), value)
            {
                out.push((token.to_owned(), instance.to_owned(), value));
            }
        }
    }
    Ok(out)
}

/// The live worker groups whose partition `scope` admits, one per token, counting instances.
pub(super) async fn groups(shared: &Shared, scope: &Scope) -> redis::RedisResult<Vec<WorkerGroup>> {
    let mut by_token: BTreeMap<String, WorkerGroup> = BTreeMap::new();
    for (mut token, _instance, value) in liveness(shared).await? {
        shared.tokens.from_wire(&mut token);
        let (name, partition) = split_token(&token);
        if !scope.admits(partition.tenant()) {
            continue;
        }
        let seen = seen_at(&value);
        let group = by_token
            .entry(token.clone())
            .or_insert_with(|| WorkerGroup {
                name: name.to_owned(),
                partition: Some(partition),
                workers: 0,
                last_seen: None,
            });
        group.workers += 1;
        group.last_seen = group.last_seen.max(seen);
    }
    Ok(by_token.into_values().collect())
}

/// How long one read of the worker directory answers dispatch checks before it is read again.
const DIRECTORY_FRESH: Duration = Duration::from_secs(2);
/// How old a read may be and still answer while a new one is made: an announcement's lifetime.
const DIRECTORY_STALE: Duration = Duration::from_secs(TTL_SECS);

/// Clears the "a read is under way" flag when dropped.
struct Refreshing<'a>(&'a AtomicBool);

impl Drop for Refreshing<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// The live workers' descriptors by token, for the dispatch guard. A dispatch never waits for
/// Redis once the directory was read: a stale read answers while a fresh one is made in the
/// background (at most one at a time, at most every [`DIRECTORY_FRESH`]). A descriptor is
/// fetched again only when its liveness value's `descriptorHash` changed (wire §6.2).
#[derive(Default)]
pub(super) struct Directory {
    snapshot: std::sync::Mutex<Snapshot>,
    refreshing: AtomicBool,
}

#[derive(Clone, Default)]
struct Snapshot {
    read_at: Option<Instant>,
    by_token: Arc<HashMap<String, Vec<Announced>>>,
}

/// One live instance on one token, as last read.
#[derive(Clone)]
struct Announced {
    instance: String,
    hash: Option<String>,
    descriptor: WorkerDescriptor,
}

impl Directory {
    /// The descriptors announced on `token` by live workers.
    pub(super) async fn descriptors(
        shared: &Arc<Shared>,
        token: &str,
    ) -> redis::RedisResult<Vec<WorkerDescriptor>> {
        let directory = &shared.directory;
        let snapshot = directory.snapshot().clone();
        let by_token = match snapshot.read_at {
            // Never read, or so long ago that every worker in it may be gone: wait for a read.
            None => directory.refresh(shared).await?,
            Some(at) if at.elapsed() >= DIRECTORY_STALE => directory.refresh(shared).await?,
            Some(at) => {
                if at.elapsed() >= DIRECTORY_FRESH
                    && !directory.refreshing.swap(true, Ordering::AcqRel)
                {
                    let shared = shared.clone();
                    tokio::spawn(async move {
                        // Cleared however the read ends, so a failed one does not stop the next.
                        let _refreshing = Refreshing(&shared.directory.refreshing);
                        if let Err(e) = shared.directory.refresh(&shared).await {
                            tracing::debug!(error = %e, "reading the worker directory failed; the last read still answers");
                        }
                    });
                }
                snapshot.by_token
            }
        };
        // A token this namespace cannot route has no workers here.
        let Ok(token) = shared.tokens.to_wire(token) else {
            return Ok(Vec::new());
        };
        Ok(by_token
            .get(token)
            .map(|live| live.iter().map(|a| a.descriptor.clone()).collect())
            .unwrap_or_default())
    }

    fn snapshot(&self) -> std::sync::MutexGuard<'_, Snapshot> {
        self.snapshot
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Reads the directory from Redis and keeps it.
    async fn refresh(
        &self,
        shared: &Shared,
    ) -> redis::RedisResult<Arc<HashMap<String, Vec<Announced>>>> {
        let known = self.snapshot().by_token.clone();
        let fresh = Arc::new(read_directory(shared, &known).await?);
        *self.snapshot() = Snapshot {
            read_at: Some(Instant::now()),
            by_token: fresh.clone(),
        };
        Ok(fresh)
    }
}

/// Reads the live instances, reusing a descriptor from `known` when its hash is unchanged.
/// An instance that announced no (readable) descriptor predates the handshake and is left out.
async fn read_directory(
    shared: &Shared,
    known: &HashMap<String, Vec<Announced>>,
) -> redis::RedisResult<HashMap<String, Vec<Announced>>> {
    let mut fresh: HashMap<String, Vec<Announced>> = HashMap::new();
    let mut to_fetch: Vec<(String, String, Option<String>)> = Vec::new();
    for (token, instance, value) in liveness(shared).await? {
        let hash = descriptor_hash(&value);
        let reused = hash.as_ref().and_then(|h| {
            known
                .get(&token)?
                .iter()
                .find(|a| a.instance == instance && a.hash.as_ref() == Some(h))
                .cloned()
        });
        match reused {
            Some(announced) => fresh.entry(token).or_default().push(announced),
            None => to_fetch.push((token, instance, hash)),
        }
    }
    let mut conn = shared.conn.clone();
    for chunk in to_fetch.chunks(200) {
        let keys: Vec<String> = chunk
            .iter()
            .map(|(token, instance, _)| worker_descriptor_key(&shared.p, token, instance))
            .collect();
        let values: Vec<Option<String>> =
            redis::cmd("MGET").arg(keys).query_async(&mut conn).await?;
        for ((token, instance, hash), value) in chunk.iter().zip(values) {
            let Some(value) = value else { continue };
            match serde_json::from_str::<WorkerDescriptor>(&value) {
                Ok(descriptor) => fresh.entry(token.clone()).or_default().push(Announced {
                    instance: instance.clone(),
                    hash: hash.clone(),
                    descriptor,
                }),
                Err(e) => {
                    tracing::debug!(error = %e, token, instance, "skipped a descriptor that does not parse")
                }
            }
        }
    }
    Ok(fresh)
}

/// The `descriptorHash` of a liveness value, when it carries one.
fn descriptor_hash(value: &str) -> Option<String> {
    let parsed: Value = serde_json::from_str(value).ok()?;
    Some(parsed.get("descriptorHash")?.as_str()?.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn liveness_values_in_every_form() {
        assert_eq!(
            seen_at(r#"{"ts":1795939520882,"status":{}}"#),
            Some(1_795_939_520_882)
        );
        assert_eq!(seen_at("1795939520"), Some(1_795_939_520_000));
        assert_eq!(seen_at(r#"{"ts":1795939520}"#), Some(1_795_939_520_000));
        assert_eq!(seen_at("up"), None);
    }

    #[test]
    fn the_descriptor_hash_of_a_liveness_value() {
        assert_eq!(
            descriptor_hash(r#"{"ts": 1, "status": {}, "descriptorHash": "44c6793c8eb7089f"}"#),
            Some("44c6793c8eb7089f".into())
        );
        assert_eq!(descriptor_hash(r#"{"ts":1}"#), None);
        assert_eq!(descriptor_hash("1795939520"), None);
    }
}
