//! Each tenant's steps run on its own partition's workers.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use durable::StartRun;
use durable::model::{RunStatus, Scope};
use durable::transport::WorkerRegistry;
use durable::transport::redis_testing::fresh_transport;
use serde_json::json;

use crate::common::wait_for;
use crate::harness::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_tenants_steps_run_only_on_its_own_pool() {
    let Some(transport) = fresh_transport().await else {
        return;
    };
    let (acme_runs, globex_runs, bare_runs) = (
        Arc::new(AtomicU32::new(0)),
        Arc::new(AtomicU32::new(0)),
        Arc::new(AtomicU32::new(0)),
    );
    let (_dir, store, engine) = control_plane_on_sqlite(
        &transport,
        Arc::new(counting_registry(Arc::new(AtomicU32::new(0)))),
    )
    .await;
    let acme = worker_on(&transport, counting_registry(acme_runs.clone()), "acme").await;
    let globex = worker_on(&transport, counting_registry(globex_runs.clone()), "globex").await;
    // An un-partitioned worker serves only bare tokens: it must never see a tenant's step.
    let bare = worker_on(&transport, counting_registry(bare_runs.clone()), "default").await;

    let mut started = Vec::new();
    for (tenant, n) in [("acme", 1), ("acme", 10), ("globex", 100)] {
        let run = engine
            .start_run(StartRun {
                workflow: "sum3".into(),
                input: json!(n),
                namespace: Some(ns(tenant)),
                ..StartRun::default()
            })
            .await
            .expect("start");
        started.push((run.id, n + 3));
    }
    for (id, want) in &started {
        let done = wait_for(&store, id, RunStatus::Completed).await;
        assert_eq!(done.output, Some(json!(want)));
    }
    assert_eq!(acme_runs.load(Ordering::SeqCst), 6);
    assert_eq!(globex_runs.load(Ordering::SeqCst), 3);
    assert_eq!(bare_runs.load(Ordering::SeqCst), 0);
    let groups = transport
        .worker_groups(&Scope::Only(ns("acme")))
        .await
        .expect("groups");
    assert_eq!(
        groups.iter().map(|g| g.token()).collect::<Vec<_>>(),
        ["add@acme", "sum3@acme"],
        "the pool announces its step and its workflow"
    );
    for w in [acme, globex, bare] {
        w.shutdown().await;
    }
    engine.shutdown().await;
}
