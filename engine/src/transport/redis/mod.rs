//! The Redis transport: the aviary wire on BullMQ-compatible queues (`docs/WIRE.md`), so a
//! control plane, our Rust workers and the unmodified Node and Python SDK workers share one
//! Redis. Step tasks go to `P-tasks-<name@partition>`, results come back on the sending
//! control plane's own `P-results-<instance>` or on the shared `P-results` (see [`replies`]),
//! cancels travel on `P-control`, tenant events on `P-tenant-events-<namespace>`, and every
//! consuming process announces itself with liveness and descriptor keys.
//!
//! Queue operations are our own Lua scripts written from the documented key layout
//! ([`queue`]); connections come from the `redis` crate.

mod consumer;
mod control;
mod definitions;
mod events;
#[macro_use]
mod holds;
mod inbox;
mod outbox;
mod pubsub;
mod queue;
mod rates;
mod recovery;
mod registry;
mod remote_turns;
mod replies;
mod run_requests;
mod shared_pools;
mod slots;
mod stalls;
mod steps;
#[cfg(any(test, feature = "test-util"))]
pub mod testing;
mod workers;

use std::sync::Arc;

use redis::aio::{ConnectionManager, MultiplexedConnection};
use tokio::sync::broadcast;

use self::queue::Scripts;
use super::naming::{TokenSpace, effective_prefix, is_instance_char};
use super::{RemoteTurns, Transport, TransportError, TransportResult};
use crate::model::{Millis, Namespace, TenantEvent};

/// A Redis call that failed, counted in the transport's error metric.
fn unavailable(message: String) -> TransportError {
    crate::metrics::transport_error("redis");
    TransportError::Unavailable(message)
}

/// Tenant events a local subscriber may fall behind by before it is told it lagged.
const LOCAL_EVENTS: usize = 4096;

/// Where and how to reach Redis.
#[derive(Clone, Debug)]
pub struct RedisConfig {
    /// `redis://[user:password@]host:port[/db]`.
    pub url: String,
    /// The wire prefix (`durable` unless every process of the cluster agrees on another).
    pub prefix: String,
    /// The process's namespace: `None` or `default` keeps the bare prefix ("default is bare").
    pub namespace: Option<Namespace>,
}

impl RedisConfig {
    /// The default prefix on `url`, with no namespace.
    pub fn new(url: impl Into<String>) -> Self {
        RedisConfig {
            url: url.into(),
            prefix: super::naming::DEFAULT_PREFIX.to_owned(),
            namespace: None,
        }
    }
}

/// What every consumer, listener and announcement of one transport shares.
struct Shared {
    client: redis::Client,
    /// For ordinary commands (reconnects on its own).
    conn: ConnectionManager,
    /// The effective prefix `P`.
    p: String,
    /// How routing tokens are spelled under `P`.
    tokens: TokenSpace,
    /// This process on the wire (`rs-<host>-<pid>-<uuid>`).
    instance: String,
    /// This process's own results queue, named in the tasks it sends, once it consumes
    /// results (see [`replies`]).
    reply_queue: std::sync::OnceLock<String>,
    scripts: Scripts,
    /// The rate allowance script ([`rates`]).
    rate_script: redis::Script,
    /// The concurrency slot scripts ([`slots`]).
    slot_scripts: slots::SlotScripts,
    /// This transport's tenant events, for its own subscribers: they get them at once, not
    /// after a trip through Redis (whose echo they skip).
    local_events: broadcast::Sender<TenantEvent>,
    started_at: Millis,
    /// The live workers' descriptors, for the dispatch guard.
    directory: registry::Directory,
    /// What this process took and has not settled ([`holds`]).
    holds: holds::Holds,
}

impl Shared {
    /// Every key matching `pattern`, read with `SCAN … COUNT 100` (never `KEYS`, wire §1.3).
    async fn scan(&self, pattern: &str) -> redis::RedisResult<Vec<String>> {
        let mut conn = self.conn.clone();
        let mut keys = Vec::new();
        let mut cursor: u64 = 0;
        loop {
            let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(pattern)
                .arg("COUNT")
                .arg(100)
                .query_async(&mut conn)
                .await?;
            keys.extend(batch);
            if next == 0 {
                return Ok(keys);
            }
            cursor = next;
        }
    }

    /// A connection for blocking commands that wait up to `block`: its own, with a response
    /// timeout longer than that wait (the default one would cut a `BZPOPMIN` short), so a
    /// connection that died without a reset (a dropped route, an idle timeout on the way) is
    /// noticed and replaced instead of waited on forever.
    async fn blocking_connection(
        &self,
        block: std::time::Duration,
    ) -> redis::RedisResult<MultiplexedConnection> {
        let timeout = block + std::time::Duration::from_secs(5);
        let config = redis::AsyncConnectionConfig::new().set_response_timeout(Some(timeout));
        self.client
            .get_multiplexed_async_connection_with_config(&config)
            .await
    }
}

/// The aviary wire over Redis. Cheap to clone.
#[derive(Clone)]
pub struct RedisTransport {
    shared: Arc<Shared>,
}

fn now_ms() -> Millis {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as Millis)
}

impl RedisTransport {
    /// Connects and checks the server answers; fails fast with a message naming the URL (its
    /// password left out) when it does not.
    pub async fn connect(config: RedisConfig) -> TransportResult<Self> {
        let unanswered = |e: redis::RedisError| {
            unavailable(format!(
                "Redis at {} does not answer ({e}); start it or fix REDIS_URL",
                crate::url::redact(&config.url)
            ))
        };
        let client = redis::Client::open(config.url.as_str()).map_err(|e| {
            unavailable(format!(
                "REDIS_URL `{}` is not a Redis URL ({e}); use redis://HOST:PORT",
                crate::url::redact(&config.url)
            ))
        })?;
        let mut conn = ConnectionManager::new(client.clone())
            .await
            .map_err(unanswered)?;
        let _: String = redis::cmd("PING")
            .query_async(&mut conn)
            .await
            .map_err(unanswered)?;
        // Only characters an instance id may carry, so its results queue is one workers accept.
        let host: String = std::env::var("HOSTNAME")
            .unwrap_or_else(|_| "host".into())
            .chars()
            .map(|c| if is_instance_char(c) { c } else { '-' })
            .collect();
        let p = effective_prefix(&config.prefix, config.namespace.as_ref());
        let instance = format!(
            "rs-{host}-{}-{}",
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        );
        Ok(RedisTransport {
            shared: Arc::new(Shared {
                client,
                conn,
                holds: holds::Holds::new(&p, &instance),
                p,
                tokens: TokenSpace::new(config.namespace.as_ref()),
                instance,
                rate_script: rates::script(),
                slot_scripts: slots::SlotScripts::default(),
                scripts: Scripts::default(),
                reply_queue: std::sync::OnceLock::new(),
                local_events: broadcast::channel(LOCAL_EVENTS).0,
                started_at: now_ms(),
                directory: registry::Directory::default(),
            }),
        })
    }

    /// The effective prefix every name of this transport starts with.
    pub fn prefix(&self) -> &str {
        &self.shared.p
    }

    /// `token` as this transport's wire spells it (see [`TokenSpace`]).
    fn wire_token(&self, token: &str) -> TransportResult<String> {
        self.shared
            .tokens
            .to_wire(token)
            .map(str::to_owned)
            .map_err(TransportError::Unsupported)
    }

    /// This process's instance id on the wire.
    pub fn instance_id(&self) -> &str {
        &self.shared.instance
    }
}

/// SDK workers on the broker (Python's `durable-worker`, or ours) run workflow turns.
impl Transport for RedisTransport {
    fn remote_turns(&self) -> Option<&dyn RemoteTurns> {
        Some(self)
    }
}
