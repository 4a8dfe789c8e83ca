//! A started process: an engine and its embedded step worker, over one store connection and
//! one transport.

use std::sync::Arc;

use durable::StartRun;
use durable::model::{Namespace, Run, Scope};
use durable::prelude::*;
use durable::runtime::{Clock, ConnectionSource, Worker, WorkerConfig};
use durable::store::Store;
use durable::transport::{EventDelivery, Partitions, Subscription, Transport};
use serde_json::Value;

/// An engine with its embedded step worker, as one process runs them.
pub struct Harness {
    /// The control plane under test.
    pub engine: Engine,
    /// `None` once a case took it to stop or replace it.
    pub worker: Option<Worker>,
    /// The process's connection to the case's store, to read what the engine wrote.
    pub store: Arc<dyn Store>,
}

impl Harness {
    /// Starts `engine` (over `store`), and a worker on its transport for `registry` on
    /// `partitions`, reading `clock`.
    pub async fn start(
        engine: Engine,
        store: Arc<dyn Store>,
        registry: Arc<Registry>,
        partitions: Partitions,
        clock: Arc<dyn Clock>,
    ) -> Harness {
        engine.start().await.expect("engine starts");
        let transport = engine.transport().clone();
        // The embedded worker opens the tenants' connections through its engine.
        let connections = Some(engine.connection_source());
        let worker = start_worker_with(registry, transport, partitions, clock, connections).await;
        Harness {
            engine,
            worker: Some(worker),
            store,
        }
    }

    /// Starts `workflow` with `input` in the default namespace.
    pub async fn start_run(&self, workflow: &str, input: Value) -> Run {
        self.engine
            .start_run(StartRun {
                workflow: workflow.into(),
                input,
                ..Default::default()
            })
            .await
            .expect("start")
    }

    /// The tenant events of namespace `ns`, from now on.
    pub async fn events(&self, ns: Namespace) -> Subscription<EventDelivery> {
        self.engine
            .transport()
            .subscribe_events(Scope::Only(ns))
            .await
            .expect("subscribe")
    }

    /// Stops the worker, then the engine.
    pub async fn stop(mut self) {
        if let Some(w) = self.worker.take() {
            w.shutdown().await;
        }
        self.engine.shutdown().await;
    }
}

/// A step worker serving `partitions` of `transport`, reading `clock`, with no access to
/// connections (as a store-less worker has none).
pub async fn start_worker(
    registry: Arc<Registry>,
    transport: Arc<dyn Transport>,
    partitions: Partitions,
    clock: Arc<dyn Clock>,
) -> Worker {
    start_worker_with(registry, transport, partitions, clock, None).await
}

/// [`start_worker`], opening connections from `connections`.
pub async fn start_worker_with(
    registry: Arc<Registry>,
    transport: Arc<dyn Transport>,
    partitions: Partitions,
    clock: Arc<dyn Clock>,
    connections: Option<Arc<dyn ConnectionSource>>,
) -> Worker {
    Worker::start(
        registry,
        transport,
        clock,
        WorkerConfig {
            partitions,
            concurrency: 8,
            connections,
        },
    )
    .await
    .expect("worker starts")
}
