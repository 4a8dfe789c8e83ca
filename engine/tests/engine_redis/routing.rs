//! Routing across control planes: an edit of a tenant's rules made on one control plane is in
//! force on another from its next dispatch decision, not after its periodic check.

use std::sync::Arc;

use durable::StartRun;
use durable::model::{Partition, PoolName, RoutingRules, RunStatus};
use durable::prelude::*;
use durable::runtime::{SystemClock, Worker, WorkerConfig};
use durable::transport::redis_testing::fresh_transport;
use durable::transport::{Partitions, RedisTransport};
use serde_json::{Value, json};

use crate::common::wait_for;
use crate::harness::{control_plane, ns, same_prefix, sqlite};

/// A worker answering which pool it serves.
async fn answering(transport: &RedisTransport, partition: &str, answer: &'static str) -> Worker {
    let mut registry = Registry::new();
    registry.step("where", move |_ctx: StepContext, _: Value| async move {
        Ok::<_, StepError>(answer.to_owned())
    });
    Worker::start(
        Arc::new(registry),
        Arc::new(transport.clone()),
        Arc::new(SystemClock),
        WorkerConfig {
            partitions: Partitions::Only(vec![Partition::parse(partition).expect("partition")]),
            concurrency: 4,
            connections: None,
        },
    )
    .await
    .expect("worker")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_on_one_control_plane_reroutes_the_next_step_on_another() {
    let Some(first) = fresh_transport().await else {
        return;
    };
    let second = same_prefix(&first).await;
    let dir = tempfile::tempdir().expect("tmp");
    let store = sqlite(&dir).await;
    let mut registry = Registry::new();
    registry.workflow(
        "route.open",
        1,
        |ctx: WorkflowContext, _: Value| async move {
            let answer: String = ctx.step("where", &json!(null)).await?;
            Ok::<_, WorkflowError>(json!(answer))
        },
    );
    let registry = Arc::new(registry);
    let a = control_plane(&store, &first, registry.clone()).await;
    // Started second, it counts the first as a live peer from its start: its edits wait for
    // the first's acknowledgement.
    let b = control_plane(&store, &second, registry).await;
    let workers = [
        answering(&first, "acme.gpu", "gpu").await,
        answering(&first, "acme", "own").await,
    ];
    let acme = ns("acme");
    b.put_pool(&acme, PoolName::parse("gpu").unwrap(), Default::default())
        .await
        .unwrap();
    let rules =
        |raw: Value| serde_json::from_value::<RoutingRules>(json!({ "rules": raw })).unwrap();
    b.put_routing_rules(
        &acme,
        rules(
            json!([{"match": {"step": "where"}, "pool": "gpu"}, {"match": {}, "pool": "default"}]),
        ),
    )
    .await
    .unwrap();
    let start = || StartRun {
        workflow: "route.open".into(),
        input: Value::Null,
        namespace: Some(acme.clone()),
        ..Default::default()
    };
    let run = a.start_run(start()).await.unwrap();
    let done = wait_for(&store, &run.id, RunStatus::Completed).await;
    assert_eq!(
        done.output,
        Some(json!("gpu")),
        "the first plane routes by the rule"
    );

    // The first plane keeps its copy for seconds; the edit on the second reaches it at once.
    b.put_routing_rules(&acme, rules(json!([{"match": {}, "pool": "default"}])))
        .await
        .unwrap();
    let run = a.start_run(start()).await.unwrap();
    let done = wait_for(&store, &run.id, RunStatus::Completed).await;
    assert_eq!(
        done.output,
        Some(json!("own")),
        "the edit rerouted the first plane's next step"
    );
    for worker in workers {
        worker.shutdown().await;
    }
    b.shutdown().await;
    a.shutdown().await;
}
