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

/// acme's and globex's pools named `gpu` are two partitions: acme's pool worker never runs a
/// step globex routes to its own `gpu`, even while globex's has no worker (the step waits for
/// one), and each tenant's step runs on its own pool.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_pool_worker_never_serves_another_tenants_pool_of_the_same_name() {
    let Some(transport) = fresh_transport().await else {
        return;
    };
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
    let engine = control_plane(&store, &transport, Arc::new(registry)).await;
    let to_gpu = serde_json::from_value::<RoutingRules>(json!({"rules": [
        {"match": {"step": "where"}, "pool": "gpu"}, {"match": {}, "pool": "default"},
    ]}))
    .expect("rules");
    for tenant in ["acme", "globex"] {
        let tenant = ns(tenant);
        engine
            .put_pool(
                &tenant,
                PoolName::parse("gpu").expect("name"),
                Default::default(),
            )
            .await
            .expect("pool");
        engine
            .put_routing_rules(&tenant, to_gpu.clone())
            .await
            .expect("rules");
    }
    let start = |tenant: &str| StartRun {
        workflow: "route.open".into(),
        input: Value::Null,
        namespace: Some(ns(tenant)),
        ..Default::default()
    };
    let acme_gpu = answering(&transport, "acme.gpu", "acme").await;

    // globex's step waits for a worker of its own pool; acme's pool worker leaves it.
    let waiting = engine.start_run(start("globex")).await.expect("start");
    let acme_run = engine.start_run(start("acme")).await.expect("start");
    let done = wait_for(&store, &acme_run.id, RunStatus::Completed).await;
    assert_eq!(done.output, Some(json!("acme")));
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    let still = store
        .get_run(&durable::model::Scope::All, &waiting.id)
        .await
        .expect("read")
        .expect("run");
    assert_ne!(
        still.status,
        RunStatus::Completed,
        "acme's worker ran globex's step"
    );

    let globex_gpu = answering(&transport, "globex.gpu", "globex").await;
    let done = wait_for(&store, &waiting.id, RunStatus::Completed).await;
    assert_eq!(done.output, Some(json!("globex")));
    for worker in [acme_gpu, globex_gpu] {
        worker.shutdown().await;
    }
    engine.shutdown().await;
}
