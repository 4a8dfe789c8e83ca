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
use durable::runtime::Clock;
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

async fn a_second_process_on_the_same_database_leaves_a_live_peers_steps_alone(
    mut backend: Backend,
) {
    let clock = backend.test_clock();
    let db = backend.sqlite_file().expect("an embedded-only case");
    let executions = Arc::new(AtomicU32::new(0));
    let short_lease = |owner: &str| EngineConfig {
        owner: owner.into(),
        lease: Duration::from_secs(1),
        ..EngineConfig::default()
    };
    // Process A has no worker: step 0 waits in A's in-process queue.
    let a = backend.engine(
        backend.store().await,
        backend.transport().await,
        Arc::new(order_registry(executions.clone())),
        short_lease("process-a"),
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
    let b = backend.engine(
        store.clone(),
        transport.clone(),
        registry.clone(),
        short_lease("process-b"),
    );
    b.start().await.expect("b starts");
    let worker = backend.worker(registry, transport).await;
    // A lease and a half pass, a quarter of a lease at a time, as time passes for a live
    // process: A's heartbeat keeps up with the clock (it is at least half a lease ahead before
    // each step, so A is alive whenever B looks), and B's rounds look for lost steps meanwhile.
    for _ in 0..6 {
        heartbeat_ahead(&db, "process-a", clock.now() + 500).await;
        clock.advance(Duration::from_millis(250));
    }
    assert_eq!(
        executions.load(Ordering::SeqCst),
        0,
        "a live peer's step was sent again"
    );
    // A stops: its queue is gone with it, so B's next round sends the step again and B
    // finishes the run.
    a.shutdown().await;
    clock.advance(Duration::from_millis(500));
    let done = wait_for(&store, &run.id, RunStatus::Completed).await;
    assert_eq!(done.output, Some(json!({"total": 10})));
    assert_eq!(executions.load(Ordering::SeqCst), 3, "each step ran once");
    worker.shutdown().await;
    b.shutdown().await;
}

/// Waits (at most 10 s) until driver `owner`'s heartbeat in the SQLite file at `db` says it is
/// alive at least until `until`.
async fn heartbeat_ahead(db: &std::path::Path, owner: &str, until: i64) {
    let read = rusqlite::Connection::open(db).expect("open");
    read.busy_timeout(Duration::from_secs(5))
        .expect("busy timeout");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let alive_until: i64 = read
            .query_row(
                "SELECT alive_until FROM drivers WHERE owner = ?",
                [owner],
                |row| row.get(0),
            )
            .expect("the driver beats");
        if alive_until >= until {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{owner}'s heartbeat never reached {until}: {alive_until}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
