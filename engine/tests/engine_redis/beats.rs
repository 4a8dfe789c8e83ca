//! Step beats keep a slow step from timing out.

use std::sync::Arc;
use std::time::Duration;

use durable::StartRun;
use durable::model::{Heartbeat, RetryPolicy, RunStatus};
use durable::prelude::*;
use durable::runtime::{SystemClock, Worker, WorkerConfig};
use durable::transport::redis_testing::fresh_transport;
use durable::transport::{Partitions, WorkerRegistry, naming};
use serde_json::json;

use crate::common::wait_for;
use crate::harness::*;

/// A step whose worker beats for it (as TypeScript workers do) outlives its timeout; the same
/// step without beats times out. Beats count only for the step's own routing token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn step_beats_keep_a_slow_step_from_timing_out() {
    let Some(transport) = fresh_transport().await else {
        return;
    };
    let mut registry = Registry::new();
    registry.step("slow", |_ctx: StepContext, n: i64| async move {
        tokio::time::sleep(Duration::from_millis(1200)).await;
        Ok::<_, StepError>(n)
    });
    registry.workflow("beaten", 1, |ctx: WorkflowContext, n: i64| async move {
        let options = StepOptions::default()
            .retry(RetryPolicy::none())
            .timeout(Duration::from_millis(500));
        let out: i64 = ctx.step_with("slow", &n, options).await?;
        Ok::<_, WorkflowError>(out)
    });
    let registry = Arc::new(registry);
    let worker = Worker::start(
        registry.clone(),
        Arc::new(transport.clone()),
        Arc::new(SystemClock),
        WorkerConfig {
            partitions: Partitions::Only(vec![ns("acme").into()]),
            concurrency: 8,
            connections: None,
        },
    )
    .await
    .expect("worker");
    let (_dir, store, engine) = control_plane_on_sqlite(&transport, registry).await;
    let start = |n: i64| {
        engine.start_run(StartRun {
            workflow: "beaten".into(),
            input: json!(n),
            namespace: Some(ns("acme")),
            ..StartRun::default()
        })
    };
    let (beaten, silent) = (
        start(1).await.expect("start"),
        start(2).await.expect("start"),
    );
    let group = naming::routing_token("slow", Some(&ns("acme")));
    let beats = {
        let (transport, run_id) = (transport.clone(), beaten.id.clone());
        tokio::spawn(async move {
            for _ in 0..10 {
                for group in [group.clone(), "slow@globex".to_owned()] {
                    let beat = Heartbeat {
                        run_id: run_id.clone(),
                        seq: 0,
                        step_id: Some(format!("{run_id}:0")),
                        group,
                    };
                    transport.publish_heartbeat(beat).await.expect("beat");
                }
                tokio::time::sleep(Duration::from_millis(150)).await;
            }
        })
    };
    let failed = wait_for(&store, &silent.id, RunStatus::Failed).await;
    assert_eq!(
        failed.error.and_then(|e| e.code).as_deref(),
        Some("timeout"),
        "without beats the step times out"
    );
    let done = wait_for(&store, &beaten.id, RunStatus::Completed).await;
    assert_eq!(
        done.output,
        Some(json!(1)),
        "the beaten step finished in its first try"
    );
    beats.await.expect("beats");
    worker.shutdown().await;
    engine.shutdown().await;
}
