//! Redis answering late: a command it carried out whose answer the client gave up on, as on a
//! loaded machine (the chaos round saw consumers log `taking jobs failed; reconnecting
//! error=timed out`). A proxy in front of Redis ([`ReplyHold`]) holds the answers of one
//! process back while its commands still run, and each case shows that no step's job is added
//! twice, no step runs twice and every run completes.

mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use common::wait_until;
use durable::StartRun;
use durable::model::{Namespace, RunId, RunStatus};
use durable::prelude::*;
use durable::runtime::{SystemClock, Worker, WorkerConfig};
use durable::store::{SqliteStore, Store};
use durable::transport::redis_testing::{ReplyHold, fresh_transport, task_adds, test_url};
use durable::transport::{Partitions, RedisConfig, RedisTransport, naming};
use serde_json::json;
use tokio::sync::Semaphore;

fn acme() -> Namespace {
    Namespace::parse("acme").expect("namespace")
}

/// Three `add` steps; each execution is counted, then waits for a permit of `gate`.
fn gated_registry(executions: Arc<AtomicU32>, gate: Arc<Semaphore>) -> Registry {
    let mut r = Registry::new();
    r.step("add", move |_ctx: StepContext, n: i64| {
        let (executions, gate) = (executions.clone(), gate.clone());
        async move {
            executions.fetch_add(1, Ordering::SeqCst);
            gate.acquire().await.expect("gate").forget();
            Ok::<_, StepError>(n + 1)
        }
    });
    r.workflow("sum3", 1, |ctx: WorkflowContext, n: i64| async move {
        let a: i64 = ctx.step("add", &n).await?;
        let b: i64 = ctx.step("add", &a).await?;
        let c: i64 = ctx.step("add", &b).await?;
        Ok::<_, WorkflowError>(c)
    });
    r
}

/// A second transport on `beside`'s prefix, through `proxy`: another process of the cluster.
async fn through(proxy: &ReplyHold, beside: &RedisTransport) -> RedisTransport {
    RedisTransport::connect(RedisConfig {
        prefix: beside.prefix().to_owned(),
        ..RedisConfig::new(proxy.url())
    })
    .await
    .expect("connect through the proxy")
}

async fn control_plane(
    dir: &tempfile::TempDir,
    transport: &RedisTransport,
    registry: Registry,
    config: EngineConfig,
) -> (Arc<dyn Store>, Engine) {
    let store: Arc<dyn Store> = Arc::new(
        SqliteStore::connect(&format!("sqlite://{}/t.db", dir.path().display()))
            .await
            .expect("store"),
    );
    let engine = Engine::new(
        store.clone(),
        Arc::new(transport.clone()),
        Arc::new(registry),
        config,
    );
    engine.start().await.expect("engine");
    (store, engine)
}

async fn worker(transport: &RedisTransport, registry: Registry) -> Worker {
    Worker::start(
        Arc::new(registry),
        Arc::new(transport.clone()),
        Arc::new(SystemClock),
        WorkerConfig {
            partitions: Partitions::Only(vec![acme().into()]),
            concurrency: 8,
            connections: None,
        },
    )
    .await
    .expect("worker starts")
}

/// Polls `count` until it reaches `want` (at most 10 s).
async fn until_count(count: &AtomicU32, want: u32) {
    for _ in 0..1000 {
        if count.load(Ordering::SeqCst) >= want {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("only {} of {want}", count.load(Ordering::SeqCst));
}

/// Every step task job was added exactly once: three of them, one per step of the run.
async fn one_job_per_try(transport: &RedisTransport) {
    let added: HashMap<String, usize> = task_adds(transport).await.expect("task adds");
    assert_eq!(added.len(), 3, "one job per step: {added:?}");
    let twice: Vec<_> = added.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "task jobs added again: {twice:?}");
}

/// How many jobs `transport`'s process holds taken and unsettled.
async fn held(transport: &RedisTransport) -> usize {
    let mut conn = redis::Client::open(test_url())
        .expect("url")
        .get_multiplexed_async_connection()
        .await
        .expect("redis");
    redis::cmd("HLEN")
        .arg(naming::taken_key(
            transport.prefix(),
            transport.instance_id(),
        ))
        .query_async(&mut conn)
        .await
        .expect("hlen")
}

/// Which process of the pair hears Redis through the proxy.
enum Slow {
    Worker,
    ControlPlane,
}

/// A control plane on SQLite and a Rust worker of `sum3` on a fresh prefix, one of them
/// through a [`ReplyHold`].
struct Rig {
    direct: RedisTransport,
    slow: RedisTransport,
    proxy: ReplyHold,
    executions: Arc<AtomicU32>,
    gate: Arc<Semaphore>,
    store: Arc<dyn Store>,
    engine: Engine,
    pool: Worker,
    _dir: tempfile::TempDir,
}

impl Rig {
    /// `None` where the Redis suites are skipped. The steps start with `permits` of the gate.
    async fn start(slow_side: Slow, permits: usize, config: EngineConfig) -> Option<Rig> {
        let direct = fresh_transport().await?;
        let proxy = ReplyHold::start().await;
        let slow = through(&proxy, &direct).await;
        let executions = Arc::new(AtomicU32::new(0));
        let gate = Arc::new(Semaphore::new(permits));
        let registry = || gated_registry(executions.clone(), gate.clone());
        let (cp, worker_side) = match slow_side {
            Slow::Worker => (&direct, &slow),
            Slow::ControlPlane => (&slow, &direct),
        };
        let dir = tempfile::tempdir().expect("tmp");
        let (store, engine) = control_plane(&dir, cp, registry(), config).await;
        let pool = worker(worker_side, registry()).await;
        Some(Rig {
            direct,
            slow,
            proxy,
            executions,
            gate,
            store,
            engine,
            pool,
            _dir: dir,
        })
    }

    async fn start_run(&self) -> RunId {
        let run = self
            .engine
            .start_run(StartRun {
                workflow: "sum3".into(),
                input: json!(1),
                namespace: Some(acme()),
                ..StartRun::default()
            })
            .await
            .expect("start");
        run.id
    }

    /// Run `id` completes with each step run once and its job added once.
    async fn completes(self, id: &RunId) {
        let done = wait_until(&self.store, id, Duration::from_secs(40), |r| {
            r.status == RunStatus::Completed
        })
        .await;
        assert_eq!(done.output, Some(json!(4)));
        one_job_per_try(&self.direct).await;
        assert_eq!(
            self.executions.load(Ordering::SeqCst),
            3,
            "each step ran once"
        );
        assert_eq!(held(&self.slow).await, 0, "nothing left held");
        self.pool.shutdown().await;
        self.engine.shutdown().await;
    }
}

/// A worker's take that Redis carried out while its answer was held past the consumer's
/// response timeout: the consumer gives the take's jobs back and takes them again, so the step
/// runs once, its job was added once, and the run completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_take_whose_answer_timed_out_runs_its_step_once() {
    let Some(rig) = Rig::start(Slow::Worker, 100, EngineConfig::default()).await else {
        return;
    };
    // The worker waits on its queue; from now on it hears nothing back.
    tokio::time::sleep(Duration::from_millis(500)).await;
    rig.proxy.hold();
    let run = rig.start_run().await;
    // Redis takes the first step's job for the worker, which never hears of it.
    for _ in 0..200 {
        if held(&rig.slow).await == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(held(&rig.slow).await, 1, "the take ran in Redis");
    // Past the consumer's response timeout (its 2 s wait and 5 s of slack).
    tokio::time::sleep(Duration::from_secs(9)).await;
    assert_eq!(
        rig.executions.load(Ordering::SeqCst),
        0,
        "nothing ran unheard"
    );
    rig.proxy.release();
    rig.completes(&run).await;
}

/// A step whose worker finished it (its job gone, its result queued) while its control plane
/// heard nothing back from Redis for longer than the redispatch window, its results consumer
/// timing out meanwhile: the redispatch loop finds the job gone and waits a window for the
/// result instead of sending the step again, so the step runs once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_held_up_past_the_redispatch_window_does_not_send_its_step_again() {
    let config = EngineConfig {
        redispatch_after: Duration::from_secs(5),
        ..EngineConfig::default()
    };
    let Some(rig) = Rig::start(Slow::ControlPlane, 0, config).await else {
        return;
    };
    let run = rig.start_run().await;
    until_count(&rig.executions, 1).await;
    // The control plane stops hearing from Redis; the step finishes and its result waits.
    rig.proxy.hold();
    rig.gate.add_permits(1);
    // Past the redispatch window and the results consumer's response timeout.
    tokio::time::sleep(Duration::from_secs(9)).await;
    rig.proxy.release();
    rig.gate.add_permits(100);
    rig.completes(&run).await;
}
