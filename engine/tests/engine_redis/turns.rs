//! Workflow turns run by workers and decisions passed between control planes.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use durable::StartRun;
use durable::model::{RunStatus, Scope};
use durable::prelude::*;
use durable::transport::WorkerRegistry;
use durable::transport::redis_testing::fresh_transport;
use serde_json::{Value, json};

use crate::common::wait_for;
use crate::harness::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rust_worker_runs_the_turns_of_a_workflow_the_control_plane_lacks() {
    let Some(transport) = fresh_transport().await else {
        return;
    };
    let executions = Arc::new(AtomicU32::new(0));
    let mut worker_registry = counting_registry(executions.clone());
    worker_registry.workflow("rs.flow", 1, |ctx: WorkflowContext, n: i64| async move {
        let started = ctx.now().await;
        let a: i64 = ctx.step("add", &n).await?;
        ctx.sleep(Duration::from_millis(100)).await;
        let go: Option<Value> = ctx.wait_signal("go", None).await?;
        let doubled: i64 = ctx.child("rs.double", &a).await?;
        Ok::<_, WorkflowError>(
            json!({ "a": a, "go": go, "doubled": doubled, "started": started > 0 }),
        )
    });
    worker_registry.workflow("rs.double", 1, |_ctx: WorkflowContext, n: i64| async move {
        Ok::<_, WorkflowError>(n * 2)
    });
    let worker = worker_on(&transport, worker_registry, "acme").await;
    // The control plane registers nothing: every turn and step runs on the worker.
    let (_dir, store, engine) =
        control_plane_on_sqlite(&transport, Arc::new(Registry::new())).await;
    let acme = ns("acme");
    let run = engine
        .start_run(StartRun {
            workflow: "rs.flow".into(),
            input: json!(4),
            namespace: Some(acme.clone()),
            ..StartRun::default()
        })
        .await
        .expect("start");
    crate::common::wait_for_signal_wait(&store, &run.id).await;
    engine
        .signal(&Scope::Only(acme.clone()), &run.id, "go", json!("now"))
        .await
        .expect("signal");
    let done = wait_for(&store, &run.id, RunStatus::Completed).await;
    assert_eq!(
        done.output,
        Some(json!({ "a": 5, "go": "now", "doubled": 10, "started": true }))
    );
    assert_eq!(executions.load(Ordering::SeqCst), 1, "the step ran once");
    worker.shutdown().await;
    engine.shutdown().await;
}

/// Two control planes share the database and the decisions queue, so about half the decisions
/// of the turns one sends are taken off the queue by the other. Each such decision is relayed
/// to the sender and applied at once: every run finishes well inside the 30 s silence window
/// after which an unanswered turn would be sent again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decision_taken_by_another_control_plane_reaches_the_one_awaiting_it() {
    let Some(first) = fresh_transport().await else {
        return;
    };
    let second = same_prefix(&first).await;
    let mut worker_registry = counting_registry(Arc::new(AtomicU32::new(0)));
    worker_registry.workflow("rs.pair", 1, |ctx: WorkflowContext, n: i64| async move {
        let a: i64 = ctx.step("add", &n).await?;
        let b: i64 = ctx.step("add", &a).await?;
        Ok::<_, WorkflowError>(b)
    });
    let worker = worker_on(&first, worker_registry, "acme").await;
    let dir = tempfile::tempdir().expect("tmp");
    let store = sqlite(&dir).await;
    let engines = [
        control_plane(&store, &first, Arc::new(Registry::new())).await,
        control_plane(&store, &second, Arc::new(Registry::new())).await,
    ];
    let mut ids = Vec::new();
    for i in 0..12 {
        let run = engines[i % 2]
            .start_run(StartRun {
                workflow: "rs.pair".into(),
                input: json!(i),
                namespace: Some(ns("acme")),
                ..StartRun::default()
            })
            .await
            .expect("start");
        ids.push((i as i64, run.id));
    }
    let finished = tokio::time::timeout(Duration::from_secs(20), async {
        for (n, id) in &ids {
            let done = wait_for(&store, id, RunStatus::Completed).await;
            assert_eq!(done.output, Some(json!(n + 2)));
        }
    })
    .await;
    assert!(
        finished.is_ok(),
        "runs waited for the silence window: a decision was not relayed to its sender"
    );
    worker.shutdown().await;
    for engine in engines {
        engine.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_parked_while_its_workers_were_gone_resumes_when_one_returns() {
    let Some(transport) = fresh_transport().await else {
        return;
    };
    let waiting = || {
        let mut r = Registry::new();
        r.workflow("rs.wait", 1, |ctx: WorkflowContext, _: Value| async move {
            let go: Option<Value> = ctx.wait_signal("go", None).await?;
            Ok::<_, WorkflowError>(json!({ "go": go }))
        });
        r
    };
    let worker = worker_on(&transport, waiting(), "acme").await;
    let (_dir, store, engine) =
        control_plane_on_sqlite(&transport, Arc::new(Registry::new())).await;
    let acme = ns("acme");
    let run = engine
        .start_run(StartRun {
            workflow: "rs.wait".into(),
            input: json!({}),
            namespace: Some(acme.clone()),
            ..StartRun::default()
        })
        .await
        .expect("start");
    crate::common::wait_for_signal_wait(&store, &run.id).await;

    // The only worker goes away; the signal's turn finds nobody and parks the run.
    worker.shutdown().await;
    for _ in 0..100 {
        if transport
            .worker_groups(&Scope::Only(acme.clone()))
            .await
            .expect("groups")
            .is_empty()
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    engine
        .signal(&Scope::Only(acme.clone()), &run.id, "go", json!(1))
        .await
        .expect("signal");
    let parked = wait_for(&store, &run.id, RunStatus::Blocked).await;
    assert_eq!(
        parked.error.and_then(|e| e.code).as_deref(),
        Some("no_worker")
    );

    // A worker returns: the sweep un-parks the run and it finishes there.
    let worker = worker_on(&transport, waiting(), "acme").await;
    let done = wait_for(&store, &run.id, RunStatus::Completed).await;
    assert_eq!(done.output, Some(json!({ "go": 1 })));
    worker.shutdown().await;
    engine.shutdown().await;
}
