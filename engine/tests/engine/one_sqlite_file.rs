//! Two processes on one SQLite file, each with its own in-process transport.
//!
//! Embedded only: the case relies on a live process's queued step being out of its peer's
//! reach, which holds for the in-process transport only; on Redis the peer's worker takes the
//! step from the shared queue at once, as it should.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use durable::StartRun;
use durable::model::RunStatus;
use durable::prelude::*;
use durable::transport::Transport;
use serde_json::json;

use crate::backend::Backend;
use crate::common::wait_for;
use crate::registries::order_registry;

engine_cases! {
    ;
    embedded_only:
    a_second_process_on_the_same_database_leaves_a_live_peers_steps_alone,
}

async fn a_second_process_on_the_same_database_leaves_a_live_peers_steps_alone(backend: Backend) {
    let executions = Arc::new(AtomicU32::new(0));
    let short_lease = || EngineConfig {
        lease: Duration::from_secs(1),
        ..EngineConfig::default()
    };
    // Process A has no worker: step 0 waits in A's in-process queue.
    let a = Engine::new(
        backend.store().await,
        backend.transport().await,
        Arc::new(order_registry(executions.clone())),
        short_lease(),
    );
    a.start().await.expect("a starts");
    let run = a
        .start_run(StartRun {
            workflow: "sum3".into(),
            input: json!(7),
            ..Default::default()
        })
        .await
        .expect("start");
    let store = backend.store().await;
    wait_for(&store, &run.id, RunStatus::Suspended).await;
    // Process B starts on the same file with a worker of its own. A is alive and still holds
    // the task, so B must not send it again: that would run the step twice.
    let transport: Arc<dyn Transport> = backend.transport().await;
    let registry = Arc::new(order_registry(executions.clone()));
    let b = Engine::new(
        store.clone(),
        transport.clone(),
        registry.clone(),
        short_lease(),
    );
    b.start().await.expect("b starts");
    let worker = backend.worker(registry, transport).await;
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(
        executions.load(Ordering::SeqCst),
        0,
        "a live peer's step was sent again"
    );
    // A stops: its queue is gone with it, so B sends the step again and finishes the run.
    a.shutdown().await;
    let done = wait_for(&store, &run.id, RunStatus::Completed).await;
    assert_eq!(done.output, Some(json!({"total": 10})));
    assert_eq!(executions.load(Ordering::SeqCst), 3, "each step ran once");
    worker.shutdown().await;
    b.shutdown().await;
}
