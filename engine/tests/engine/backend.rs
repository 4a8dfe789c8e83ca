//! Where a case runs: the embedded pair or PostgreSQL + Redis, fresh for each case, and the
//! processes a case starts there.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use durable::prelude::*;
use durable::runtime::{Clock, SystemClock, TestClock, Worker};
use durable::store::{PgStore, SqliteStore, Store, postgres_testing};
use durable::transport::{
    MemoryTransport, Partitions, RedisConfig, RedisTransport, Transport, redis_testing,
};

use crate::harness::{Harness, start_worker};

/// The namespaces the cases run in, which a worker on a shared broker names one by one.
const NAMESPACES: [&str; 3] = ["default", "acme", "globex"];

/// One case's deployment: its store, how its processes reach each other, and the clock they
/// read. Every process a case starts ([`Backend::start`], [`Backend::peer`],
/// [`Backend::engine`]) opens its own connection to the store, as a separate process would.
pub struct Backend {
    place: Place,
    /// What every process of the case reads the time from: the wall clock, or the case's
    /// [`TestClock`] once it took one.
    clock: Arc<dyn Clock>,
}

enum Place {
    /// A SQLite file in a directory of its own (removed with the backend). Each process has its
    /// own in-process transport, as embedded processes do.
    Embedded { dir: tempfile::TempDir },
    /// A fresh PostgreSQL database and a fresh Redis key prefix, which every process shares, as
    /// a cluster's processes do.
    PostgresRedis { database: String, prefix: String },
}

impl Backend {
    /// The embedded pair: a fresh SQLite file and the in-process transport.
    pub async fn embedded() -> Backend {
        let dir = tempfile::tempdir().expect("tmp");
        Backend {
            place: Place::Embedded { dir },
            clock: Arc::new(SystemClock),
        }
    }

    /// PostgreSQL + Redis: a fresh database and a fresh key prefix. `None`, after a loud line,
    /// when the PostgreSQL or the Redis suites are skipped on this machine
    /// (`DURABLE_SKIP_POSTGRES`, `DURABLE_SKIP_REDIS`); an unreachable server fails the case.
    pub async fn postgres_redis() -> Option<Backend> {
        let skipped: Vec<&str> = ["DURABLE_SKIP_POSTGRES", "DURABLE_SKIP_REDIS"]
            .into_iter()
            .filter(|var| std::env::var_os(var).is_some())
            .collect();
        if !skipped.is_empty() {
            eprintln!(
                "!!! {} set: SKIPPING an engine case on PostgreSQL + Redis !!!",
                skipped.join(" and ")
            );
            return None;
        }
        let database = postgres_testing::fresh_database().await?;
        let prefix = redis_testing::fresh_transport().await?.prefix().to_owned();
        Some(Backend {
            place: Place::PostgresRedis { database, prefix },
            clock: Arc::new(SystemClock),
        })
    }

    /// A [`TestClock`] standing at the real now, which every process the case starts from now
    /// on reads instead of the wall clock: the case moves engine time (timers, backoffs, step
    /// timeouts, leases) with [`TestClock::advance`] rather than waiting for it. Near the real
    /// now, because the rows and job stamps the stores and Redis keep are compared with it.
    pub fn test_clock(&mut self) -> Arc<TestClock> {
        let clock = Arc::new(TestClock::starting_now());
        self.clock = clock.clone();
        clock
    }

    /// The clock the case's processes read.
    pub fn clock(&self) -> Arc<dyn Clock> {
        self.clock.clone()
    }

    /// An engine on `store` and `transport` serving `registry` with `config` and the case's
    /// clock, not started.
    pub fn engine(
        &self,
        store: Arc<dyn Store>,
        transport: Arc<dyn Transport>,
        registry: Arc<Registry>,
        config: EngineConfig,
    ) -> Engine {
        Engine::with_clock(store, transport, registry, config, self.clock())
    }

    /// The SQLite file, for the cases that hold its write lock or open it themselves; `None`
    /// off the embedded pair.
    pub fn sqlite_file(&self) -> Option<PathBuf> {
        match &self.place {
            Place::Embedded { dir } => Some(dir.path().join("db")),
            Place::PostgresRedis { .. } => None,
        }
    }

    /// A new connection to the case's store (what a process opens when it starts).
    pub async fn store(&self) -> Arc<dyn Store> {
        match &self.place {
            Place::Embedded { dir } => sqlite_at(&dir.path().join("db")).await,
            Place::PostgresRedis { database, .. } => {
                Arc::new(PgStore::connect(database).await.expect("connect"))
            }
        }
    }

    /// A new process's transport: an in-process one of its own on the embedded pair, a new
    /// connection to the case's key prefix on Redis.
    pub async fn transport(&self) -> Arc<dyn Transport> {
        match &self.place {
            Place::Embedded { .. } => Arc::new(MemoryTransport::new()),
            Place::PostgresRedis { prefix, .. } => {
                let config = RedisConfig {
                    prefix: prefix.clone(),
                    ..RedisConfig::new(redis_testing::test_url())
                };
                Arc::new(RedisTransport::connect(config).await.expect("redis"))
            }
        }
    }

    /// What a case's step worker serves: every partition on the embedded pair; on Redis, which
    /// refuses that (a shared broker serves named partitions only), each namespace the cases use.
    pub fn partitions(&self) -> Partitions {
        match &self.place {
            Place::Embedded { .. } => Partitions::All,
            Place::PostgresRedis { .. } => Partitions::Only(
                NAMESPACES
                    .iter()
                    .map(|ns| Namespace::parse(ns).expect("namespace").into())
                    .collect(),
            ),
        }
    }

    /// A step worker serving `registry` on `transport` and [`Backend::partitions`].
    pub async fn worker(&self, registry: Arc<Registry>, transport: Arc<dyn Transport>) -> Worker {
        start_worker(registry, transport, self.partitions(), self.clock()).await
    }

    /// A process serving `registry`: an engine with its embedded step worker, on a new store
    /// connection and transport.
    pub async fn start(&self, registry: Registry) -> Harness {
        self.start_on(self.store().await, registry).await
    }

    /// [`Backend::start`] on `store`, a connection the case already holds.
    pub async fn start_on(&self, store: Arc<dyn Store>, registry: Registry) -> Harness {
        self.start_with(store, registry, EngineConfig::default())
            .await
    }

    /// [`Backend::start_on`] with `config` (one turn slot, say, so runs queue for it).
    pub async fn start_with(
        &self,
        store: Arc<dyn Store>,
        registry: Registry,
        config: EngineConfig,
    ) -> Harness {
        let registry = Arc::new(registry);
        let engine = self.engine(
            store.clone(),
            self.transport().await,
            registry.clone(),
            config,
        );
        Harness::start(engine, store, registry, self.partitions(), self.clock()).await
    }

    /// Another control plane on the case's store, with nothing registered, started.
    pub async fn peer(&self) -> Engine {
        self.peer_serving(Registry::new()).await
    }

    /// Another control plane on the case's store that turns `registry`'s workflows itself,
    /// started: a result it takes from a shared queue takes the same paths as on the first.
    pub async fn peer_serving(&self, registry: Registry) -> Engine {
        let peer = self.engine(
            self.store().await,
            self.transport().await,
            Arc::new(registry),
            EngineConfig::default(),
        );
        peer.start().await.expect("the peer starts");
        peer
    }
}

/// A new connection to the SQLite file at `path`.
async fn sqlite_at(path: &Path) -> Arc<dyn Store> {
    Arc::new(
        SqliteStore::connect(&format!("sqlite://{}", path.display()))
            .await
            .expect("connect"),
    )
}
