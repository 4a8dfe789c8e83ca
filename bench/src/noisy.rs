//! The noisy neighbour: tenant `acme` starts a backlog of runs spread over many workflows, then
//! tenant `globex` starts runs one at a time for as long as acme's backlog lasts; the latency
//! of globex's runs that overlapped the backlog against globex alone (`B_RUNS` runs), and
//! acme's throughput against acme alone. Each phase runs on a fresh engine and database.
//!
//! `cargo run --release -p durable-bench --bin noisy [-- A_RUNS WORKFLOWS B_RUNS STEP_MS]`
//! (defaults 10,000, 50, 20, 0; `STEP_MS` is how long each of acme's steps sleeps).
//!
//! The embedded default (SQLite, the in-process transport, one step worker) unless
//! `DURABLE_BENCH_CLUSTER=1`: then PostgreSQL (a fresh database) and Redis (a fresh prefix),
//! with one step worker per tenant in this process (`DURABLE_TEST_POSTGRES`,
//! `DURABLE_TEST_REDIS` say where).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use durable::StartRun;
use durable::model::{Namespace, RunId, Scope, TenantEventKind};
use durable::prelude::*;
use durable::runtime::{SystemClock, Worker, WorkerConfig};
use durable::store::{PgStore, SqliteStore, Store, postgres_testing};
use durable::transport::redis_testing::{fresh_prefix, test_url};
use durable::transport::{
    EventDelivery, MemoryTransport, Partitions, RedisConfig, RedisTransport, Transport,
};
use futures::StreamExt;
use serde_json::json;
use tokio::sync::mpsc;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What one phase is asked to do.
#[derive(Clone, Copy)]
struct Load {
    a_runs: usize,
    workflows: usize,
    b_runs: usize,
    step_ms: u64,
}

/// What one phase measured.
struct Measured {
    /// globex's end-to-end latencies, sorted.
    b: Vec<Duration>,
    /// acme's runs per second, from its first start to its last completion.
    a_rate: Option<f64>,
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let mut args = std::env::args().skip(1);
    let mut next = |default: u64| -> Result<u64, BoxError> {
        Ok(args
            .next()
            .map(|a| a.parse())
            .transpose()?
            .unwrap_or(default))
    };
    let load = Load {
        a_runs: next(10_000)? as usize,
        workflows: next(50)?.max(1) as usize,
        b_runs: next(20)? as usize,
        step_ms: next(0)?,
    };

    let alone_b = phase(load, false, true).await?;
    let alone_a = phase(load, true, false).await?;
    let together = phase(load, true, true).await?;

    let a_alone = alone_a.a_rate.unwrap_or(0.0);
    let a_with = together.a_rate.unwrap_or(0.0);
    let deployment = if std::env::var_os("DURABLE_BENCH_CLUSTER").is_some() {
        "PostgreSQL + Redis, a worker pool per tenant"
    } else {
        "embedded"
    };
    println!(
        "| noisy neighbour, {deployment}: acme {} runs over {} workflows (steps {} ms), globex one at a time ({} alone, {} beside acme's backlog) | globex alone | globex beside acme | ratio |",
        load.a_runs,
        load.workflows,
        load.step_ms,
        alone_b.b.len(),
        together.b.len()
    );
    println!("| --- | --- | --- | --- |");
    for p in [50.0, 99.0] {
        let (alone, with) = (ms(pct(&alone_b.b, p)), ms(pct(&together.b, p)));
        println!(
            "| globex p{p:.0} end-to-end | {alone:.1} ms | {with:.1} ms | {:.2}× |",
            with / alone.max(0.001)
        );
    }
    println!(
        "| acme throughput (alone / beside globex) | {a_alone:.0} runs/s | {a_with:.0} runs/s | {:.2}× |",
        a_with / a_alone.max(0.001)
    );
    Ok(())
}

/// One phase on a fresh engine: acme's backlog if `with_a`, then globex one at a time if
/// `with_b`, until acme's backlog has drained.
async fn phase(load: Load, with_a: bool, with_b: bool) -> Result<Measured, BoxError> {
    let dir = tempfile::tempdir()?;
    let acme = Namespace::tenant("acme")?;
    let globex = Namespace::tenant("globex")?;
    let cluster = std::env::var_os("DURABLE_BENCH_CLUSTER").is_some();
    let (store, transport): (Arc<dyn Store>, Arc<dyn Transport>) = if cluster {
        let db = postgres_testing::fresh_database()
            .await
            .ok_or("PostgreSQL is required (DURABLE_SKIP_POSTGRES is set)")?;
        let redis = RedisConfig {
            prefix: fresh_prefix(),
            ..RedisConfig::new(test_url())
        };
        (
            Arc::new(PgStore::connect(&db).await?),
            Arc::new(RedisTransport::connect(redis).await?),
        )
    } else {
        let url = format!("sqlite://{}/bench.db", dir.path().display());
        (
            Arc::new(SqliteStore::connect(&url).await?),
            Arc::new(MemoryTransport::new()),
        )
    };
    let registry = Arc::new(registry(load.workflows));
    let engine = Engine::new(
        store,
        transport.clone(),
        registry.clone(),
        EngineConfig::default(),
    );
    engine.start().await?;
    // Embedded, one worker serves everyone; in a cluster each tenant has its own pool.
    let pools = if cluster {
        vec![
            Partitions::Only(vec![acme.clone()]),
            Partitions::Only(vec![globex.clone()]),
        ]
    } else {
        vec![Partitions::All]
    };
    let mut workers = Vec::new();
    for partitions in pools {
        let config = WorkerConfig {
            partitions,
            concurrency: 256,
        };
        let worker = Worker::start(
            registry.clone(),
            transport.clone(),
            Arc::new(SystemClock),
            config,
        );
        workers.push(worker.await?);
    }

    // One reader of completions: acme's are counted, globex's handed to its driver.
    let mut events = transport.subscribe_events(Scope::All).await?;
    let (b_done_tx, mut b_done) = mpsc::unbounded_channel::<RunId>();
    let a_expected = if with_a { load.a_runs } else { 0 };
    let a_done = Arc::new(AtomicBool::new(!with_a));
    let reader = {
        let a_done = a_done.clone();
        let acme = acme.clone();
        tokio::spawn(async move {
            let mut a_left = a_expected;
            let mut a_finished = None;
            while a_left > 0 || !b_done_tx.is_closed() {
                let next = tokio::select! {
                    next = tokio::time::timeout(Duration::from_secs(600), events.next()) => next,
                    () = b_done_tx.closed(), if !b_done_tx.is_closed() => continue,
                };
                match next {
                    Ok(Some(EventDelivery::Event(ev)))
                        if ev.kind == TenantEventKind::RunCompleted =>
                    {
                        if ev.namespace == acme {
                            a_left = a_left.saturating_sub(1);
                            if a_left == 0 {
                                a_finished = Some(Instant::now());
                                a_done.store(true, Ordering::SeqCst);
                            }
                        } else {
                            let _ = b_done_tx.send(ev.run_id);
                        }
                    }
                    Ok(Some(EventDelivery::Lagged(n))) => {
                        panic!("the benchmark fell {n} events behind")
                    }
                    Ok(Some(_)) => {}
                    Ok(None) | Err(_) => {
                        panic!("runs did not complete within 600 s ({a_left} of acme's left)")
                    }
                }
            }
            a_finished
        })
    };

    let t0 = Instant::now();
    if with_a {
        // Every start in flight together (at most 256 awaiting their write), as when a burst
        // of requests arrives.
        let results: Vec<_> = futures::stream::iter(0..load.a_runs)
            .map(|i| {
                engine.start_run(StartRun {
                    workflow: format!("noisy.w{}", i % load.workflows),
                    input: json!({ "sleep_ms": load.step_ms }),
                    namespace: Some(acme.clone()),
                    ..StartRun::default()
                })
            })
            .buffer_unordered(256)
            .collect()
            .await;
        for started in results {
            started?;
        }
    }
    let mut b = Vec::with_capacity(load.b_runs);
    if with_b {
        // Beside acme, globex keeps going one at a time until acme's backlog drained, and only
        // the runs that started while it had runs outstanding count: after that globex is alone.
        while (with_a && !a_done.load(Ordering::SeqCst)) || (!with_a && b.len() < load.b_runs) {
            let overlapped = !a_done.load(Ordering::SeqCst);
            let started = Instant::now();
            let run = engine
                .start_run(StartRun {
                    workflow: "noisy.w0".into(),
                    input: json!({ "sleep_ms": 0 }),
                    namespace: Some(globex.clone()),
                    ..StartRun::default()
                })
                .await?;
            loop {
                match b_done.recv().await {
                    Some(id) if id == run.id => break,
                    Some(_) => {}
                    None => return Err("the event reader stopped".into()),
                }
            }
            if overlapped || !with_a {
                b.push(started.elapsed());
            }
        }
    }
    drop(b_done);
    let a_finished = reader.await?;
    b.sort();
    for worker in workers {
        worker.shutdown().await;
    }
    engine.shutdown().await;
    Ok(Measured {
        b,
        a_rate: a_finished.map(|at| load.a_runs as f64 / (at - t0).as_secs_f64()),
    })
}

/// `workflows` workflows `noisy.w<i>` of three steps each; a step sleeps for its input's
/// `sleep_ms`.
fn registry(workflows: usize) -> Registry {
    let mut registry = Registry::new();
    registry.step(
        "noisy.step",
        |_ctx: StepContext, input: serde_json::Value| async move {
            let sleep = input["sleep_ms"].as_u64().unwrap_or(0);
            if sleep > 0 {
                tokio::time::sleep(Duration::from_millis(sleep)).await;
            }
            Ok::<_, StepError>(input)
        },
    );
    for w in 0..workflows {
        registry.workflow(
            &format!("noisy.w{w}"),
            1,
            |ctx: WorkflowContext, input: serde_json::Value| async move {
                let a: serde_json::Value = ctx.step("noisy.step", &input).await?;
                let b: serde_json::Value = ctx.step("noisy.step", &a).await?;
                let c: serde_json::Value = ctx.step("noisy.step", &b).await?;
                Ok::<_, WorkflowError>(c)
            },
        );
    }
    registry
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    let i = ((p / 100.0) * (sorted.len().saturating_sub(1)) as f64).round() as usize;
    sorted.get(i).copied().unwrap_or_default()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
