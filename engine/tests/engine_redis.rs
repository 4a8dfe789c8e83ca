//! The engine over a real Redis: Rust step workers on their tenant's partition, and the
//! unmodified Python `durable-worker` from PyPI serving a step of a Rust workflow.
//!
//! The Python case needs `DURABLE_PYTHON`: a Python with `durable-worker[redis]==0.26.1`
//! (`make test` creates that virtualenv). Without it the case is skipped with a loud line,
//! except in CI, where it fails.

mod common;

use common::wait_for;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use durable::StartRun;
use durable::gateway::{RunRequestResponder, TokenSigner};
use durable::model::{Heartbeat, Namespace, RetryPolicy, RunId, RunStatus, Scope};
use durable::prelude::*;
use durable::runtime::{SystemClock, Worker, WorkerConfig};
use durable::store::NewRun;
use durable::store::{SqliteStore, Store};
use durable::transport::redis_testing::{add_raw_job, fresh_transport, python, test_url};
use durable::transport::{
    Partitions, RedisConfig, RedisTransport, StepQueues, WorkerRegistry, naming,
};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

fn ns(s: &str) -> Namespace {
    Namespace::parse(s).expect("namespace")
}

async fn sqlite(dir: &tempfile::TempDir) -> Arc<dyn Store> {
    Arc::new(
        SqliteStore::connect(&format!("sqlite://{}/t.db", dir.path().display()))
            .await
            .expect("store"),
    )
}

/// A started engine over `store` and the Redis `transport` with `registry`.
async fn control_plane(
    store: &Arc<dyn Store>,
    transport: &RedisTransport,
    registry: Arc<Registry>,
) -> Engine {
    let engine = Engine::new(
        store.clone(),
        Arc::new(transport.clone()),
        registry,
        EngineConfig::default(),
    );
    engine.start().await.expect("engine");
    engine
}

/// [`control_plane`] on a fresh SQLite file, in the returned directory (which must outlive
/// it).
async fn control_plane_on_sqlite(
    transport: &RedisTransport,
    registry: Arc<Registry>,
) -> (tempfile::TempDir, Arc<dyn Store>, Engine) {
    let dir = tempfile::tempdir().expect("tmp");
    let store = sqlite(&dir).await;
    let engine = control_plane(&store, transport, registry).await;
    (dir, store, engine)
}

fn counting_registry(executions: Arc<AtomicU32>) -> Registry {
    let mut r = Registry::new();
    r.step("add", move |_ctx: StepContext, n: i64| {
        let executions = executions.clone();
        async move {
            executions.fetch_add(1, Ordering::SeqCst);
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

async fn worker_on(transport: &RedisTransport, registry: Registry, partition: &str) -> Worker {
    Worker::start(
        Arc::new(registry),
        Arc::new(transport.clone()),
        Arc::new(SystemClock),
        WorkerConfig {
            partitions: Partitions::Only(vec![ns(partition)]),
            concurrency: 8,
        },
    )
    .await
    .expect("worker starts")
}

/// A plain connection to the test Redis, for looking at or planting keys beside the transport.
async fn raw_redis() -> redis::aio::MultiplexedConnection {
    redis::Client::open(test_url())
        .expect("url")
        .get_multiplexed_async_connection()
        .await
        .expect("redis")
}

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

/// Starts the Python billing worker (`tests/python/billing_worker.py`) on `prefix` and
/// partition `acme`; returns once it consumes.
async fn python_worker(python: &str, prefix: &str) -> tokio::process::Child {
    python_worker_on(python, prefix, &[("DURABLE_PARTITION", "acme")]).await
}

/// A fresh Redis prefix, the Python interpreter and the billing worker on the prefix;
/// `None` where the Redis or the Python suite is skipped.
async fn python_on_a_fresh_prefix() -> Option<(RedisTransport, String, tokio::process::Child)> {
    let transport = fresh_transport().await?;
    let python = python()?;
    let worker = python_worker(&python, transport.prefix()).await;
    Some((transport, python, worker))
}

/// [`python_worker`] with `tenancy` (its `DURABLE_PARTITION` and `DURABLE_NAMESPACE`).
async fn python_worker_on(
    python: &str,
    prefix: &str,
    tenancy: &[(&str, &str)],
) -> tokio::process::Child {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/python/billing_worker.py"
    );
    let mut child = tokio::process::Command::new(python)
        .arg(script)
        .env("REDIS_URL", test_url())
        .env("DURABLE_PREFIX", prefix)
        .env_remove("DURABLE_PARTITION")
        .env_remove("DURABLE_NAMESPACE")
        .envs(tenancy.iter().copied())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start the Python worker");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    let ready = tokio::time::timeout(Duration::from_secs(30), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if line.trim() == "READY" {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(ready, Ok(true), "the Python worker did not start");
    child
}

/// A registry with `interop.invoice`: a Rust workflow whose one step, `billing.invoice`, the
/// Python worker serves.
fn invoicing() -> Registry {
    let mut registry = Registry::new();
    registry.workflow(
        "interop.invoice",
        1,
        |ctx: WorkflowContext, input: Value| async move {
            let invoice: Value = ctx.step("billing.invoice", &input).await?;
            Ok::<_, WorkflowError>(json!({ "invoice": invoice }))
        },
    );
    registry
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_worker_serves_a_step_of_a_rust_workflow() {
    let Some((transport, _, mut python_worker)) = python_on_a_fresh_prefix().await else {
        return;
    };
    let mut registry = invoicing();
    // The same step, requiring what the run names: the guard reads the Python worker's
    // descriptor (the v1 baseline, which has `saga` and lacks `search-attr-v2`).
    registry.workflow(
        "interop.invoice-requiring",
        1,
        |ctx: WorkflowContext, (capability, input): (String, Value)| async move {
            let options = StepOptions::default().requires([capability]);
            let invoice: Value = ctx.step_with("billing.invoice", &input, options).await?;
            Ok::<_, WorkflowError>(json!({ "invoice": invoice }))
        },
    );
    let (_dir, store, engine) = control_plane_on_sqlite(&transport, Arc::new(registry)).await;
    let start = |input: Value| StartRun {
        workflow: "interop.invoice".into(),
        input,
        namespace: Some(ns("acme")),
        ..StartRun::default()
    };

    let ok = engine
        .start_run(start(json!({ "orderId": 42, "amount": 120 })))
        .await
        .expect("start");
    let done = wait_for(&store, &ok.id, RunStatus::Completed).await;
    assert_eq!(
        done.output,
        Some(json!({ "invoice": { "invoiceId": "inv_42", "amount": 120 } }))
    );

    // A Python FatalError arrives with its code and is not retried.
    let declined = engine
        .start_run(start(json!({ "orderId": 7, "decline": true })))
        .await
        .expect("start");
    let failed = wait_for(&store, &declined.id, RunStatus::Failed).await;
    let error = failed.error.expect("an error");
    assert!(error.message.contains("card declined"), "{error:?}");
    let checkpoints = store
        .checkpoints(&Scope::All, &declined.id)
        .await
        .expect("checkpoints");
    assert_eq!(checkpoints[0].attempts, 1);

    // The Python worker announced itself on the wire's registry keys.
    let groups = transport
        .worker_groups(&Scope::Only(ns("acme")))
        .await
        .expect("groups");
    assert!(
        groups
            .iter()
            .any(|g| g.token() == "billing.invoice@acme" && g.workers == 1),
        "{groups:?}"
    );

    // The dispatch guard negotiates against the Python worker's own descriptor.
    let requiring = |capability: &str| StartRun {
        workflow: "interop.invoice-requiring".into(),
        input: json!([capability, { "orderId": 9, "amount": 5 }]),
        namespace: Some(ns("acme")),
        ..StartRun::default()
    };
    let has = engine.start_run(requiring("saga")).await.expect("start");
    let done = wait_for(&store, &has.id, RunStatus::Completed).await;
    assert_eq!(
        done.output,
        Some(json!({ "invoice": { "invoiceId": "inv_9", "amount": 5 } }))
    );
    let lacks = engine
        .start_run(requiring("search-attr-v2"))
        .await
        .expect("start");
    let parked = wait_for(&store, &lacks.id, RunStatus::Blocked).await;
    let reason = parked.error.expect("a reason");
    assert_eq!(
        reason.message,
        "blocked: no compatible worker (requires search-attr-v2)"
    );
    assert_eq!(reason.code.as_deref(), Some("capability.unavailable"));
    assert!(
        store
            .checkpoints(&Scope::All, &lacks.id)
            .await
            .expect("checkpoints")
            .is_empty(),
        "the step was not queued for a worker that cannot take it"
    );
    engine.shutdown().await;
    python_worker.kill().await.expect("stop the Python worker");
}

/// A Python worker SIGKILLed while it runs a step: the step's job goes back to its queue as
/// soon as the worker's liveness lapses, put back by our control plane rather than by the
/// SDK's stalled check a minute later, as the same job (one job per try), and the surviving
/// worker runs it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_python_workers_step_goes_back_once_its_liveness_lapses() {
    let Some(transport) = fresh_transport().await else {
        return;
    };
    let Some(python) = python() else {
        return;
    };
    let partition = ("DURABLE_PARTITION", "acme");
    let mut holder = python_worker_on(
        &python,
        transport.prefix(),
        &[partition, ("DURABLE_HOLD", "1")],
    )
    .await;
    let mut registry = Registry::new();
    registry.workflow(
        "interop.hold",
        1,
        |ctx: WorkflowContext, _: Value| async move {
            let held: Value = ctx.step("billing.hold", &json!({})).await?;
            Ok::<_, WorkflowError>(held)
        },
    );
    let (_dir, store, engine) = control_plane_on_sqlite(&transport, Arc::new(registry)).await;
    let run = engine
        .start_run(StartRun {
            workflow: "interop.hold".into(),
            input: json!({}),
            namespace: Some(ns("acme")),
            ..StartRun::default()
        })
        .await
        .expect("start");
    let queue = naming::tasks_queue(transport.prefix(), "billing.hold@acme");
    let mut redis = raw_redis().await;
    let active = naming::bull_key(&queue, "active");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let running: i64 = redis::cmd("LLEN")
            .arg(&active)
            .query_async(&mut redis)
            .await
            .expect("llen");
        if running == 1 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the holder never took the step"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let survivor = python_worker_on(&python, transport.prefix(), &[partition]).await;
    let survivor_pid = survivor.id().expect("pid");
    holder.kill().await.expect("SIGKILL the holder");
    let killed = std::time::Instant::now();
    let done = common::wait_until(&store, &run.id, Duration::from_secs(90), |r| {
        r.status == RunStatus::Completed
    })
    .await;
    eprintln!(
        "the killed worker's step completed on the survivor {:.1} s after the kill",
        killed.elapsed().as_secs_f64()
    );
    assert_eq!(done.output, Some(json!({ "heldBy": survivor_pid })));
    // Put back by the control plane, once, and never added a second time.
    let events: Vec<redis::Value> = redis::cmd("XRANGE")
        .arg(naming::bull_key(&queue, "events"))
        .arg("-")
        .arg("+")
        .query_async(&mut redis)
        .await
        .expect("events");
    let text = format!("{events:?}");
    assert_eq!(
        text.matches("its worker stopped beating").count(),
        1,
        "put back once, by the control plane: {text}"
    );
    assert_eq!(text.matches("\"added\"").count(), 1, "one job: {text}");
    engine.shutdown().await;
    drop(survivor);
}

/// A control plane started with a namespace keeps every name under `P-<namespace>` and spells
/// its own tokens bare there, as the SDKs do: the unmodified Python `Worker(namespace="blue")`
/// serves its step, and nothing reaches the shared prefix.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespaced_python_worker_serves_a_namespaced_control_plane() {
    let Some(shared) = fresh_transport().await else {
        return;
    };
    let Some(python) = python() else {
        return;
    };
    let blue = ns("blue");
    let transport = RedisTransport::connect(RedisConfig {
        prefix: shared.prefix().to_owned(),
        namespace: Some(blue.clone()),
        ..RedisConfig::new(test_url())
    })
    .await
    .expect("redis");
    assert_eq!(transport.prefix(), format!("{}-blue", shared.prefix()));
    let tenancy = [("DURABLE_PARTITION", ""), ("DURABLE_NAMESPACE", "blue")];
    let mut python_worker = python_worker_on(&python, shared.prefix(), &tenancy).await;
    let dir = tempfile::tempdir().expect("tmp");
    let store = sqlite(&dir).await;
    let registry = invoicing();
    let engine = Engine::new(
        store.clone(),
        Arc::new(transport.clone()),
        Arc::new(registry),
        EngineConfig {
            namespace: Some(blue.clone()),
            ..EngineConfig::default()
        },
    );
    engine.start().await.expect("engine");

    let run = engine
        .start_run(StartRun {
            workflow: "interop.invoice".into(),
            input: json!({ "orderId": 5, "amount": 30 }),
            ..StartRun::default()
        })
        .await
        .expect("start");
    assert_eq!(run.namespace, blue);
    let done = wait_for(&store, &run.id, RunStatus::Completed).await;
    assert_eq!(
        done.output,
        Some(json!({ "invoice": { "invoiceId": "inv_5", "amount": 30 } }))
    );
    let checkpoints = store
        .checkpoints(&Scope::All, &run.id)
        .await
        .expect("checkpoints");
    assert_eq!(
        checkpoints[0].worker_group.as_deref(),
        Some("billing.invoice@blue"),
        "the engine names the token as ever; only the wire leaves the namespace out"
    );

    // The Python worker announced the bare token under the namespaced prefix, which reads back
    // as blue's; the shared prefix heard of no worker at all.
    let mut redis = raw_redis().await;
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{}-worker-heartbeat:*", transport.prefix()))
        .query_async(&mut redis)
        .await
        .expect("keys");
    assert!(
        keys.iter().any(|k| k.starts_with(&format!(
            "{}-worker-heartbeat:billing.invoice:py-",
            transport.prefix()
        ))),
        "{keys:?}"
    );
    let groups = transport
        .worker_groups(&Scope::Only(blue.clone()))
        .await
        .expect("groups");
    assert!(
        groups
            .iter()
            .any(|g| g.token() == "billing.invoice@blue" && g.workers == 1),
        "{groups:?}"
    );
    assert_eq!(
        shared.worker_groups(&Scope::All).await.expect("groups"),
        Vec::new()
    );
    // The directory is re-read every few seconds: an earlier read may predate the worker's
    // first announcement.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let descriptors = loop {
        let descriptors = transport
            .worker_descriptors("billing.invoice@blue")
            .await
            .expect("descriptors");
        if !descriptors.is_empty() || std::time::Instant::now() > deadline {
            break descriptors;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(descriptors.len(), 1, "{descriptors:?}");
    assert_eq!(descriptors[0].namespace.as_deref(), Some("blue"));

    // Another tenant's token cannot be routed under blue's prefix.
    let refused = transport
        .dispatch(durable::model::RemoteTask {
            run_id: run.id.clone(),
            seq: 9,
            name: "billing.invoice".into(),
            step_id: durable::model::step_id(&run.id, 9),
            group: "billing.invoice@acme".into(),
            input: None,
            context: None,
            traceparent: None,
            attempt: 1,
            reply_to: None,
            priority: None,
            receipt: Default::default(),
        })
        .await
        .expect_err("refused");
    assert!(
        refused.to_string().contains("namespace `blue` only"),
        "{refused}"
    );
    engine.shutdown().await;
    python_worker.kill().await.expect("stop the Python worker");
}

/// Runs `tests/python/start_run.py`: the unmodified Python SDK's `Worker.start_run`, with
/// `token` as its partition (so as its message's `tenant`).
async fn python_start_run(python: &str, prefix: &str, token: &str, run_id: &str) {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/start_run.py");
    let status = tokio::process::Command::new(python)
        .arg(script)
        .args([
            "billing.close-month",
            r#"{"orderId": 11, "amount": 7, "graceMs": 50}"#,
            run_id,
        ])
        .env("REDIS_URL", test_url())
        .env("DURABLE_PREFIX", prefix)
        .env("DURABLE_TOKEN", token)
        .status()
        .await
        .expect("run start_run.py");
    assert!(status.success(), "start_run.py failed");
}

/// A store-less Python tenant starts a run through the SDK's `start_run` (a start-run message):
/// our responder starts it in the tenant of the signed token it carries, and refuses a message
/// whose token is not signed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_start_run_starts_a_run_in_its_tokens_tenant() {
    let Some((transport, python, mut python_worker)) = python_on_a_fresh_prefix().await else {
        return;
    };
    let (_dir, store, engine) =
        control_plane_on_sqlite(&transport, Arc::new(Registry::new())).await;
    let signer = TokenSigner::new(vec![9u8; 32]).expect("signer");
    tokio::spawn(RunRequestResponder::new(engine.clone(), signer.clone()).serve());

    // The plain partition name, as a Python worker sends it unless given a token: refused.
    python_start_run(&python, transport.prefix(), "acme", "run-py-forged").await;
    let token = signer.sign(&ns("acme"));
    python_start_run(&python, transport.prefix(), &token, "run-py-1").await;
    let id = RunId::parse("run-py-1").expect("id");
    common::wait_for_signal_wait(&store, &id).await;
    let run = store
        .get_run(&Scope::All, &id)
        .await
        .expect("get")
        .expect("started");
    assert_eq!(run.namespace, ns("acme"));
    assert_eq!(run.tags, ["from-python"]);
    let forged = RunId::parse("run-py-forged").expect("id");
    assert!(
        store
            .get_run(&Scope::All, &forged)
            .await
            .expect("get")
            .is_none(),
        "an unsigned start-run message started nothing"
    );
    engine
        .signal(&Scope::Only(ns("acme")), &id, "approve", json!("ok"))
        .await
        .expect("signal");
    let done = wait_for(&store, &id, RunStatus::Completed).await;
    assert_eq!(done.output.expect("output")["approval"], json!("ok"));
    engine.shutdown().await;
    python_worker.kill().await.expect("stop the Python worker");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_control_plane_drives_a_python_workflow_to_completion() {
    let Some((transport, _, mut python_worker)) = python_on_a_fresh_prefix().await else {
        return;
    };
    // Nothing registered here: every turn of these workflows runs on the Python worker.
    let (_dir, store, engine) =
        control_plane_on_sqlite(&transport, Arc::new(Registry::new())).await;
    let acme = ns("acme");
    let run = engine
        .start_run(StartRun {
            workflow: "billing.close-month".into(),
            input: json!({ "orderId": 9, "amount": 50, "graceMs": 200 }),
            namespace: Some(acme.clone()),
            ..StartRun::default()
        })
        .await
        .expect("a workflow a live worker announces can be started");

    // The clock read, the step (served by the Python step worker) and the timer pass; then the
    // run waits for its signal.
    common::wait_for_signal_wait(&store, &run.id).await;
    engine
        .signal(
            &Scope::Only(acme.clone()),
            &run.id,
            "approve",
            json!({ "by": "ops" }),
        )
        .await
        .expect("signal");
    let done = wait_for(&store, &run.id, RunStatus::Completed).await;
    let output = done.output.expect("output");
    assert_eq!(
        output["invoice"],
        json!({ "invoiceId": "inv_9", "amount": 50 })
    );
    assert_eq!(output["approval"], json!({ "by": "ops" }));
    assert_eq!(output["receipt"], json!({ "receiptFor": "inv_9" }));
    assert!(output["startedAt"].is_number());
    // A signal sent before the workflow waits for it is buffered, and the wait takes it when
    // the worker reaches it.
    let early = engine
        .start_run(StartRun {
            workflow: "billing.close-month".into(),
            input: json!({ "orderId": 10, "amount": 5, "graceMs": 300 }),
            namespace: Some(acme.clone()),
            ..StartRun::default()
        })
        .await
        .expect("start");
    engine
        .signal(
            &Scope::Only(acme.clone()),
            &early.id,
            "approve",
            json!("early"),
        )
        .await
        .expect("signal");
    let done_early = wait_for(&store, &early.id, RunStatus::Completed).await;
    assert_eq!(
        done_early.output.expect("output")["approval"],
        json!("early")
    );
    let child = store
        .get_run(&Scope::All, &durable::runtime::child_run_id(&run.id, 4))
        .await
        .expect("get")
        .expect("the child run");
    assert_eq!(
        child.namespace, acme,
        "the child is stamped with the parent's namespace"
    );
    assert_eq!(child.status, RunStatus::Completed);
    // The worker reported its local steps (the clock read) as step events, and the control
    // plane took every one off the queue.
    let mut redis = raw_redis().await;
    let queue = format!("bull:{}-step-events", transport.prefix());
    let sent: Option<i64> = redis::cmd("GET")
        .arg(format!("{queue}:id"))
        .query_async(&mut redis)
        .await
        .expect("GET");
    assert!(sent.unwrap_or(0) > 0, "the Python worker sent step events");
    let waiting: i64 = redis::cmd("LLEN")
        .arg(format!("{queue}:wait"))
        .query_async(&mut redis)
        .await
        .expect("LLEN");
    assert_eq!(waiting, 0, "every step event was consumed");
    engine.shutdown().await;
    python_worker.kill().await.expect("stop the Python worker");
}

/// A Python workflow's `call.group` (wire §3.5): its run's partition or `default` routes the
/// step to the run's tenant as ever; any other partition fails that step at once, and nothing
/// reaches the other tenant's queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_calls_partition_is_its_runs_or_the_step_is_refused() {
    let Some((transport, _, mut python_worker)) = python_on_a_fresh_prefix().await else {
        return;
    };
    let (_dir, store, engine) =
        control_plane_on_sqlite(&transport, Arc::new(Registry::new())).await;
    let acme = ns("acme");
    let mut outputs = Vec::new();
    for group in ["acme", "default", "globex"] {
        let run = engine
            .start_run(StartRun {
                workflow: "billing.routed".into(),
                input: json!({ "group": group }),
                namespace: Some(acme.clone()),
                ..StartRun::default()
            })
            .await
            .expect("start");
        let done = wait_for(&store, &run.id, RunStatus::Completed).await;
        outputs.push(done.output.expect("output"));
    }
    assert_eq!(outputs[0]["invoice"]["invoiceId"], "inv_1", "{outputs:?}");
    assert_eq!(outputs[1]["invoice"]["invoiceId"], "inv_1");
    let refused = outputs[2]["refused"].as_str().expect("refused");
    assert!(refused.contains("partition `globex`"), "{refused}");
    let mut redis = raw_redis().await;
    let globex_queue = format!(
        "bull:{}-tasks-billing.invoice@globex:id",
        transport.prefix()
    );
    let sent: Option<i64> = redis::cmd("GET")
        .arg(&globex_queue)
        .query_async(&mut redis)
        .await
        .expect("GET");
    assert_eq!(sent, None, "nothing was ever added to globex's queue");
    engine.shutdown().await;
    python_worker.kill().await.expect("stop the Python worker");
}

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
    common::wait_for_signal_wait(&store, &run.id).await;
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

/// Garbage on every channel and queue the control plane's inbox reads (decisions, relays,
/// beats, step events) is dropped without stopping the loop and changes nothing. Step events
/// that are not a completed step, or name a missing run, write nothing; the one valid event
/// after all of it is still checkpointed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_worker_messages_are_dropped_and_change_nothing() {
    let Some(transport) = fresh_transport().await else {
        return;
    };
    let (_dir, store, engine) =
        control_plane_on_sqlite(&transport, Arc::new(Registry::new())).await;
    let id = RunId::parse("run-garbage").expect("id");
    store
        .create_run(
            NewRun::top_level(id.clone(), ns("acme"), "py.flow", 1, json!(null)),
            1,
            None,
        )
        .await
        .expect("a run");
    let p = transport.prefix().to_owned();
    let mut redis = raw_redis().await;
    for channel in [
        naming::heartbeat_channel(&p),
        naming::decision_relay_channel(&p),
    ] {
        for payload in ["{not json", r#"{"runId":"no spaces allowed"}"#, "[]"] {
            let _: i64 = redis::cmd("PUBLISH")
                .arg(&channel)
                .arg(payload)
                .query_async(&mut redis)
                .await
                .expect("PUBLISH");
        }
    }
    let decisions = naming::decisions_queue(&p);
    for data in [
        "{not json",
        r#"{"status":"completed"}"#,
        r#"{"taskId":"run-garbage:wf:nobody"}"#,
    ] {
        add_raw_job(&transport, &decisions, "decision", data)
            .await
            .expect("add");
    }
    let events = naming::step_events_queue(&p);
    let completed = |run: &str, seq: u32| {
        json!({ "runId": run, "seq": seq, "name": "reserve", "phase": "completed",
                "startedAt": 5, "finishedAt": 6, "output": { "ok": seq } })
        .to_string()
    };
    let running = json!({ "runId": "run-garbage", "seq": 1, "name": "reserve", "phase": "running", "startedAt": 5 });
    for data in [
        "{not json".to_owned(),
        r#"{"runId":"run-garbage"}"#.to_owned(),
        running.to_string(),
        completed("run-missing", 0),
        completed("run-garbage", 2),
    ] {
        add_raw_job(&transport, &events, "stepEvent", &data)
            .await
            .expect("add");
    }
    let acme = Scope::Only(ns("acme"));
    let mut checkpoints = Vec::new();
    for _ in 0..500 {
        checkpoints = store.checkpoints(&acme, &id).await.expect("read");
        if !checkpoints.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        checkpoints.len(),
        1,
        "only the valid step event wrote: {checkpoints:?}"
    );
    assert_eq!(checkpoints[0].seq, 2);
    assert_eq!(checkpoints[0].output, Some(json!({ "ok": 2 })));
    let missing = RunId::parse("run-missing").expect("id");
    assert!(
        store
            .get_run(&Scope::All, &missing)
            .await
            .expect("read")
            .is_none()
    );
    let mut left = -1;
    for _ in 0..500 {
        left = redis::cmd("LLEN")
            .arg(format!("bull:{decisions}:wait"))
            .query_async(&mut redis)
            .await
            .expect("LLEN");
        if left == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        left, 0,
        "malformed decisions are taken off the queue, not left to block it"
    );
    engine.shutdown().await;
}

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
            partitions: Partitions::Only(vec![ns("acme")]),
            concurrency: 8,
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

/// Two control planes share the database and the decisions queue, so about half the decisions
/// of the turns one sends are taken off the queue by the other. Each such decision is relayed
/// to the sender and applied at once: every run finishes well inside the 30 s silence window
/// after which an unanswered turn would be sent again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decision_taken_by_another_control_plane_reaches_the_one_awaiting_it() {
    let Some(first) = fresh_transport().await else {
        return;
    };
    let second = RedisTransport::connect(RedisConfig {
        prefix: first.prefix().to_owned(),
        ..RedisConfig::new(test_url())
    })
    .await
    .expect("a second connection on the same prefix");
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
    common::wait_for_signal_wait(&store, &run.id).await;

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

/// What a foreign worker announces cannot break the dispatch guard: a descriptor that does not
/// parse, or a liveness key with no descriptor (a worker older than the handshake), is left out,
/// and the well-formed announcement beside them is read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_worker_announcements_are_skipped() {
    let Some(transport) = fresh_transport().await else {
        return;
    };
    let p = transport.prefix().to_owned();
    let mut redis = raw_redis().await;
    let token = "ship@acme";
    let beat = r#"{"ts": 1795939520882, "status": {}, "descriptorHash": "0000000000000000"}"#;
    let good = json!({
        "instanceId": "py-good", "runtime": "python",
        "capabilities": ["saga", "geo-v2"], "steps": ["ship"], "partition": "acme"
    })
    .to_string();
    for (instance, descriptor) in [
        ("py-good", Some(good.as_str())),
        ("py-garbage", Some("{not json")),
        ("py-wrong-shape", Some(r#"{"instanceId": 7}"#)),
        ("py-legacy", None),
    ] {
        let mut pipe = redis::pipe();
        // Announcements expire as real ones do.
        pipe.set_ex(naming::worker_heartbeat_key(&p, token, instance), beat, 60);
        if let Some(descriptor) = descriptor {
            pipe.set_ex(
                naming::worker_descriptor_key(&p, token, instance),
                descriptor,
                60,
            );
        }
        let _: () = pipe.query_async(&mut redis).await.expect("announce");
    }
    let live = transport
        .worker_descriptors(token)
        .await
        .expect("descriptors");
    assert_eq!(
        live.iter()
            .map(|d| d.instance_id.as_str())
            .collect::<Vec<_>>(),
        ["py-good"],
        "only the well-formed announcement is read"
    );
    assert_eq!(live[0].capabilities, ["saga", "geo-v2"]);
}
