//! A shared pool serves several tenants fairly: one worker pool on shared pool `gpu`, granted
//! to acme and globex. With ten thousand of acme's steps waiting, globex's steps, sent one at a
//! time, finish about as fast as with nothing else waiting: the pool's worker takes from the
//! tenants by weight, one job at a time, instead of working through acme's backlog first.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use durable::model::{Namespace, Partition, PoolName, RemoteTask, RunId};
use durable::prelude::*;
use durable::runtime::{SystemClock, Worker, WorkerConfig};
use durable::transport::naming::partition_token;
use durable::transport::redis_testing::fresh_transport;
use durable::transport::{Partitions, Transport};
use serde_json::{Value, json};
use tokio::sync::mpsc;

/// How many of globex's steps are timed, alone and beside the backlog.
const SAMPLES: usize = 15;
/// acme's backlog.
const BACKLOG: usize = 10_000;

fn task(tenant: &str, seq: u32, run: &RunId) -> RemoteTask {
    let partition = Partition::of_pool(
        Namespace::tenant(tenant).expect("test setup"),
        PoolName::parse("gpu").expect("test setup"),
    );
    RemoteTask {
        run_id: run.clone(),
        seq,
        name: "render".into(),
        step_id: format!("{run}:{seq}"),
        group: partition_token("render", &partition),
        input: Some(json!({ "tenant": tenant })),
        context: None,
        traceparent: None,
        attempt: 1,
        reply_to: None,
        priority: None,
        receipt: Default::default(),
    }
}

/// globex's steps, one at a time: how long each took from its dispatch to its end, sorted.
async fn one_at_a_time(
    transport: &Arc<dyn Transport>,
    done: &mut mpsc::UnboundedReceiver<String>,
    from: u32,
) -> Vec<Duration> {
    let run = RunId::parse("run_globex_samples").expect("test setup");
    let mut took = Vec::new();
    for seq in from..from + SAMPLES as u32 {
        let sent = Instant::now();
        transport
            .dispatch(task("globex", seq, &run))
            .await
            .expect("test setup");
        let want = format!("{run}:{seq}");
        loop {
            let id = tokio::time::timeout(Duration::from_secs(30), done.recv())
                .await
                .expect("globex's step ran")
                .expect("test setup");
            if id == want {
                break;
            }
        }
        took.push(sent.elapsed());
    }
    took.sort();
    took
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_pool_serves_a_small_tenant_beside_a_large_backlog_fairly() {
    let Some(redis) = fresh_transport().await else {
        return;
    };
    let transport: Arc<dyn Transport> = Arc::new(redis);
    let gpu = PoolName::parse("gpu").expect("test setup");
    transport
        .publish_grants(
            &gpu,
            &[
                (Namespace::tenant("acme").expect("test setup"), 1),
                (Namespace::tenant("globex").expect("test setup"), 1),
            ],
        )
        .await
        .expect("test setup");
    // acme's steps take 20 ms, globex's 100 ms; globex's ends are reported.
    let (ends, mut done) = mpsc::unbounded_channel::<String>();
    let started: Arc<Mutex<HashMap<String, u32>>> = Arc::default();
    let mut registry = Registry::new();
    let counts = started.clone();
    registry.step("render", move |ctx: StepContext, input: Value| {
        let (ends, counts) = (ends.clone(), counts.clone());
        async move {
            let tenant = input["tenant"].as_str().unwrap_or_default().to_owned();
            *counts
                .lock()
                .expect("test setup")
                .entry(tenant.clone())
                .or_default() += 1;
            let ms = if tenant == "globex" { 100 } else { 20 };
            tokio::time::sleep(Duration::from_millis(ms)).await;
            if tenant == "globex" {
                let _ = ends.send(ctx.step_id.clone());
            }
            Ok::<_, StepError>(Value::Null)
        }
    });
    let worker = Worker::start(
        Arc::new(registry),
        transport.clone(),
        Arc::new(SystemClock),
        WorkerConfig {
            partitions: Partitions::Shared(gpu.clone()),
            concurrency: 4,
            connections: None,
        },
    )
    .await
    .expect("a shared pool's worker");

    let alone = one_at_a_time(&transport, &mut done, 0).await;

    let backlog = RunId::parse("run_acme_backlog").expect("test setup");
    for seq in 0..BACKLOG as u32 {
        transport
            .dispatch(task("acme", seq, &backlog))
            .await
            .expect("test setup");
    }
    let beside = one_at_a_time(&transport, &mut done, SAMPLES as u32).await;
    let acme_started = started
        .lock()
        .expect("test setup")
        .get("acme")
        .copied()
        .unwrap_or(0);
    worker.shutdown().await;

    let p50 = |took: &[Duration]| took[took.len() / 2];
    assert!(
        acme_started > 0 && (acme_started as usize) < BACKLOG,
        "acme's backlog was being worked on throughout: {acme_started} of {BACKLOG} started"
    );
    assert!(
        p50(&beside).as_secs_f64() <= 1.5 * p50(&alone).as_secs_f64(),
        "globex's p50 beside acme's backlog was {:?}, alone {:?}",
        p50(&beside),
        p50(&alone)
    );
}
