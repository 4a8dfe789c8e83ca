//! A fresh engine for one phase: the embedded default (SQLite, the in-process transport, one
//! step worker for every tenant) or, with `DURABLE_BENCH_CLUSTER=1`, PostgreSQL (a fresh
//! database) and Redis (a fresh prefix) with one step worker pool per tenant in this process.
//! Also the completions of the phase's runs, read off the tenant events.

use std::sync::Arc;
use std::time::Duration;

use durable::model::{Namespace, RunId, Scope, TenantEventKind};
use durable::prelude::*;
use durable::runtime::{SystemClock, Worker, WorkerConfig};
use durable::store::{PgStore, SqliteStore, Store, postgres_testing};
use durable::transport::redis_testing::{fresh_prefix, test_url};
use durable::transport::{
    EventDelivery, MemoryTransport, Partitions, RedisConfig, RedisTransport, Transport,
};
use futures::StreamExt;
use serde_json::json;
use tokio::sync::mpsc;

use super::BoxError;

/// Whether this sitting measures PostgreSQL + Redis (`DURABLE_BENCH_CLUSTER` is set).
pub fn cluster() -> bool {
    std::env::var_os("DURABLE_BENCH_CLUSTER").is_some()
}

/// What the table's heading calls the deployment.
pub fn name() -> &'static str {
    if cluster() {
        "PostgreSQL + Redis, a worker pool per tenant"
    } else {
        "embedded"
    }
}

/// One phase's engine, store, transport and workers.
pub struct Deployment {
    pub engine: Engine,
    pub transport: Arc<dyn Transport>,
    workers: Vec<Worker>,
    /// Holds the SQLite file until the phase is over.
    _dir: tempfile::TempDir,
}

impl Deployment {
    /// A fresh engine serving `workflows` workflows (see [`registry`]) for `tenants`, started
    /// with its workers.
    pub async fn start(workflows: usize, tenants: &[Namespace]) -> Result<Self, BoxError> {
        let dir = tempfile::tempdir()?;
        let (store, transport): (Arc<dyn Store>, Arc<dyn Transport>) = if cluster() {
            let db = postgres_testing::fresh_database()
                .await
                .ok_or("PostgreSQL is required (DURABLE_SKIP_POSTGRES is set)")?;
            let redis = RedisConfig {
                prefix: fresh_prefix(),
                ..RedisConfig::new(test_url())
            };
            (
                Arc::new(PgStore::connect(&db).await?),
                Arc::new(RedisTransport::connect(redis).await?),
            )
        } else {
            let url = format!("sqlite://{}/bench.db", dir.path().display());
            (
                Arc::new(SqliteStore::connect(&url).await?),
                Arc::new(MemoryTransport::new()),
            )
        };
        let registry = Arc::new(registry(workflows));
        let mut config = EngineConfig::default();
        // Fewer turn slots make them what runs wait for (`DURABLE_BENCH_TURN_SLOTS`).
        if let Some(slots) = std::env::var("DURABLE_BENCH_TURN_SLOTS")
            .ok()
            .and_then(|s| s.parse().ok())
        {
            config.max_concurrent_turns = slots;
        }
        let engine = Engine::new(store, transport.clone(), registry.clone(), config);
        engine.start().await?;
        // Embedded, one worker serves everyone; in a cluster each tenant has its own pool.
        let pools = if cluster() {
            tenants
                .iter()
                .map(|t| Partitions::Only(vec![t.clone().into()]))
                .collect()
        } else {
            vec![Partitions::All]
        };
        let mut workers = Vec::new();
        for partitions in pools {
            let config = WorkerConfig {
                partitions,
                concurrency: 256,
                connections: None,
            };
            let worker = Worker::start(
                registry.clone(),
                transport.clone(),
                Arc::new(SystemClock),
                config,
            );
            workers.push(worker.await?);
        }
        Ok(Deployment {
            engine,
            transport,
            workers,
            _dir: dir,
        })
    }

    /// Every run that completes from now on, with its tenant, in the order the events come,
    /// until the engine stops; the benchmark ends if it falls behind or nothing completes for
    /// 600 s.
    pub async fn completions(
        &self,
    ) -> Result<mpsc::UnboundedReceiver<(Namespace, RunId)>, BoxError> {
        let mut events = self.transport.subscribe_events(Scope::All).await?;
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            loop {
                let next = tokio::select! {
                    next = tokio::time::timeout(Duration::from_secs(600), events.next()) => next,
                    () = tx.closed() => return,
                };
                match next {
                    Ok(Some(EventDelivery::Event(ev)))
                        if ev.kind == TenantEventKind::RunCompleted =>
                    {
                        if tx.send((ev.namespace, ev.run_id)).is_err() {
                            return;
                        }
                    }
                    Ok(Some(EventDelivery::Lagged(n))) => {
                        panic!("the benchmark fell {n} events behind")
                    }
                    Ok(Some(_)) => {}
                    // The engine stopped.
                    Ok(None) => return,
                    Err(_) => panic!("no run completed within 600 s"),
                }
            }
        });
        Ok(rx)
    }

    /// Starts `runs` runs of `tenant` spread over `workflows` workflows, at most 256 awaiting
    /// their write at once (a burst of requests), whose steps sleep `step_ms`. A task of its
    /// own, as a client is: bursts of several tenants do not take turns in one task.
    pub fn burst(
        &self,
        tenant: &Namespace,
        runs: usize,
        workflows: usize,
        step_ms: u64,
    ) -> tokio::task::JoinHandle<Result<(), BoxError>> {
        let (engine, tenant) = (self.engine.clone(), tenant.clone());
        tokio::spawn(async move { burst(&engine, &tenant, runs, workflows, step_ms).await })
    }

    /// Stops the workers, then the engine.
    pub async fn stop(self) {
        for worker in self.workers {
            worker.shutdown().await;
        }
        self.engine.shutdown().await;
    }
}

/// The requests of [`Deployment::burst`].
async fn burst(
    engine: &Engine,
    tenant: &Namespace,
    runs: usize,
    workflows: usize,
    step_ms: u64,
) -> Result<(), BoxError> {
    let results: Vec<_> = futures::stream::iter(0..runs)
        .map(|i| {
            engine.start_run(durable::StartRun {
                workflow: format!("noisy.w{}", i % workflows),
                input: json!({ "sleep_ms": step_ms }),
                namespace: Some(tenant.clone()),
                ..durable::StartRun::default()
            })
        })
        .buffer_unordered(256)
        .collect()
        .await;
    for started in results {
        started?;
    }
    Ok(())
}

/// `workflows` workflows `noisy.w<i>` of three steps each; a step sleeps for its input's
/// `sleep_ms`.
fn registry(workflows: usize) -> Registry {
    let mut registry = Registry::new();
    registry.step(
        "noisy.step",
        |_ctx: StepContext, input: serde_json::Value| async move {
            let sleep = input["sleep_ms"].as_u64().unwrap_or(0);
            if sleep > 0 {
                tokio::time::sleep(Duration::from_millis(sleep)).await;
            }
            Ok::<_, StepError>(input)
        },
    );
    for w in 0..workflows {
        registry.workflow(
            &format!("noisy.w{w}"),
            1,
            |ctx: WorkflowContext, input: serde_json::Value| async move {
                let a: serde_json::Value = ctx.step("noisy.step", &input).await?;
                let b: serde_json::Value = ctx.step("noisy.step", &a).await?;
                let c: serde_json::Value = ctx.step("noisy.step", &b).await?;
                Ok::<_, WorkflowError>(c)
            },
        );
    }
    registry
}
