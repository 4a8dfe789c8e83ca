//! What the cases share: stores, control planes, workers and the Python worker.

use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use durable::model::Namespace;
use durable::prelude::*;
use durable::runtime::{SystemClock, Worker, WorkerConfig};
use durable::store::{SqliteStore, Store};
use durable::transport::redis_testing::{fresh_transport, python, test_url};
use durable::transport::{Partitions, RedisTransport};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

pub(crate) fn ns(s: &str) -> Namespace {
    Namespace::parse(s).expect("namespace")
}

pub(crate) async fn sqlite(dir: &tempfile::TempDir) -> Arc<dyn Store> {
    Arc::new(
        SqliteStore::connect(&format!("sqlite://{}/t.db", dir.path().display()))
            .await
            .expect("store"),
    )
}

/// A started engine over `store` and the Redis `transport` with `registry`.
pub(crate) async fn control_plane(
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
pub(crate) async fn control_plane_on_sqlite(
    transport: &RedisTransport,
    registry: Arc<Registry>,
) -> (tempfile::TempDir, Arc<dyn Store>, Engine) {
    let dir = tempfile::tempdir().expect("tmp");
    let store = sqlite(&dir).await;
    let engine = control_plane(&store, transport, registry).await;
    (dir, store, engine)
}

pub(crate) fn counting_registry(executions: Arc<AtomicU32>) -> Registry {
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

pub(crate) async fn worker_on(
    transport: &RedisTransport,
    registry: Registry,
    partition: &str,
) -> Worker {
    Worker::start(
        Arc::new(registry),
        Arc::new(transport.clone()),
        Arc::new(SystemClock),
        WorkerConfig {
            partitions: Partitions::Only(vec![ns(partition).into()]),
            concurrency: 8,
            connections: None,
        },
    )
    .await
    .expect("worker starts")
}

/// Another process's connection on `first`'s key prefix (a second control plane, say).
pub(crate) async fn same_prefix(first: &RedisTransport) -> RedisTransport {
    RedisTransport::connect(durable::transport::RedisConfig {
        prefix: first.prefix().to_owned(),
        ..durable::transport::RedisConfig::new(test_url())
    })
    .await
    .expect("a second connection on the same prefix")
}

/// A plain connection to the test Redis, for looking at or planting keys beside the transport.
pub(crate) async fn raw_redis() -> redis::aio::MultiplexedConnection {
    redis::Client::open(test_url())
        .expect("url")
        .get_multiplexed_async_connection()
        .await
        .expect("redis")
}

/// Starts the Python billing worker (`tests/python/billing_worker.py`) on `prefix` and
/// partition `acme`; returns once it consumes.
pub(crate) async fn python_worker(python: &str, prefix: &str) -> tokio::process::Child {
    python_worker_on(python, prefix, &[("DURABLE_PARTITION", "acme")]).await
}

/// A fresh Redis prefix, the Python interpreter and the billing worker on the prefix;
/// `None` where the Redis or the Python suite is skipped.
pub(crate) async fn python_on_a_fresh_prefix()
-> Option<(RedisTransport, String, tokio::process::Child)> {
    let transport = fresh_transport().await?;
    let python = python()?;
    let worker = python_worker(&python, transport.prefix()).await;
    Some((transport, python, worker))
}

/// [`python_worker`] with `tenancy` (its `DURABLE_PARTITION` and `DURABLE_NAMESPACE`).
pub(crate) async fn python_worker_on(
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
pub(crate) fn invoicing() -> Registry {
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

/// Runs `tests/python/start_run.py`: the unmodified Python SDK's `Worker.start_run`, with
/// `token` as its partition (so as its message's `tenant`).
pub(crate) async fn python_start_run(python: &str, prefix: &str, token: &str, run_id: &str) {
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
