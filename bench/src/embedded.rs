//! The embedded default (SQLite + in-process transport + embedded worker): a 3-step workflow,
//! one run at a time (end-to-end latency) and 2,000 runs started at once (throughput).
//!
//! `cargo run --release -p durable-bench --bin embedded [-- RUNS_AT_ONCE SEQUENTIAL_RUNS]`
//! (`DURABLE_BENCH_DATABASE=postgres://…` runs the same engine on PostgreSQL instead.)

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use durable::StartRun;
use durable::model::{RunId, Scope, TenantEventKind};
use durable::prelude::*;
use durable::runtime::{SystemClock, Worker, WorkerConfig};
use durable::store::{PgStore, SqliteStore, Store};
use durable::transport::{EventDelivery, MemoryTransport, Partitions, Subscription, Transport};
use futures::StreamExt;
use serde_json::json;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let burst: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(2000);
    let sequential: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(300);

    let dir = tempfile::tempdir()?;
    // `DURABLE_BENCH_DATABASE=postgres://…` swaps the store, to see its share of a run.
    let store: Arc<dyn Store> = match std::env::var("DURABLE_BENCH_DATABASE") {
        Ok(url) if url.starts_with("postgres") => Arc::new(PgStore::connect(&url).await?),
        _ => Arc::new(
            SqliteStore::connect(&format!("sqlite://{}/bench.db", dir.path().display())).await?,
        ),
    };
    let transport: Arc<dyn Transport> = Arc::new(MemoryTransport::new());
    let mut registry = Registry::new();
    registry.step("bench.add", |_ctx: StepContext, n: i64| async move {
        Ok::<_, StepError>(n + 1)
    });
    registry.workflow(
        "bench.three",
        1,
        |ctx: WorkflowContext, n: i64| async move {
            let a: i64 = ctx.step("bench.add", &n).await?;
            let b: i64 = ctx.step("bench.add", &a).await?;
            let c: i64 = ctx.step("bench.add", &b).await?;
            Ok::<_, WorkflowError>(c)
        },
    );
    let registry = Arc::new(registry);
    let engine = Engine::new(
        store.clone(),
        transport.clone(),
        registry.clone(),
        EngineConfig::default(),
    );
    engine.start().await?;
    let worker = Worker::start(
        registry,
        transport.clone(),
        Arc::new(SystemClock),
        WorkerConfig {
            partitions: Partitions::All,
            concurrency: 256,
            connections: None,
        },
    )
    .await?;
    let mut events = transport.subscribe_events(Scope::All).await?;

    // One at a time: start, then wait for its completion event.
    let mut latencies = Vec::with_capacity(sequential);
    for i in 0..sequential {
        let t0 = Instant::now();
        let run = engine
            .start_run(StartRun {
                workflow: "bench.three".into(),
                input: json!(i),
                ..StartRun::default()
            })
            .await?;
        wait_completed(&mut events, &HashSet::from([run.id])).await;
        latencies.push(t0.elapsed());
    }
    latencies.sort();

    // At once: start `burst` runs while a reader counts their completions.
    let counter = tokio::spawn(async move {
        let mut left = burst;
        while left > 0 {
            match tokio::time::timeout(Duration::from_secs(60), events.next()).await {
                Ok(Some(EventDelivery::Event(ev))) if ev.kind == TenantEventKind::RunCompleted => {
                    left -= 1
                }
                Ok(Some(EventDelivery::Lagged(n))) => {
                    panic!("the benchmark fell {n} events behind")
                }
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => panic!("runs did not complete within 60 s ({left} left)"),
            }
        }
    });
    // At once: every start is in flight together (at most 256 awaiting their write), as when
    // a burst of requests arrives.
    let t0 = Instant::now();
    let starts: Vec<_> = futures::stream::iter(0..burst)
        .map(|i| {
            engine.start_run(StartRun {
                workflow: "bench.three".into(),
                input: json!(i),
                ..StartRun::default()
            })
        })
        .buffer_unordered(256)
        .collect()
        .await;
    for started in starts {
        started?;
    }
    let started = t0.elapsed();
    counter.await?;
    let total = t0.elapsed();

    println!("| embedded default (SQLite + in-process), 3-step workflow | value |");
    println!("| --- | --- |");
    println!(
        "| one at a time, p50 end-to-end | {:.2} ms |",
        ms(pct(&latencies, 50.0))
    );
    println!(
        "| one at a time, p99 end-to-end | {:.2} ms |",
        ms(pct(&latencies, 99.0))
    );
    println!(
        "| {burst} started at once: start calls | {:.0} runs/s |",
        burst as f64 / started.as_secs_f64()
    );
    println!(
        "| {burst} started at once: completed | {:.0} runs/s ({:.2} s) |",
        burst as f64 / total.as_secs_f64(),
        total.as_secs_f64()
    );
    worker.shutdown().await;
    engine.shutdown().await;
    Ok(())
}

async fn wait_completed(events: &mut Subscription<EventDelivery>, ids: &HashSet<RunId>) {
    let mut left = ids.len();
    while left > 0 {
        match tokio::time::timeout(Duration::from_secs(60), events.next()).await {
            Ok(Some(EventDelivery::Event(ev)))
                if ev.kind == TenantEventKind::RunCompleted && ids.contains(&ev.run_id) =>
            {
                left -= 1
            }
            Ok(Some(EventDelivery::Lagged(n))) => {
                panic!("the benchmark fell {n} events behind; raise the event buffer")
            }
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => panic!("runs did not complete within 60 s ({left} left)"),
        }
    }
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    let i = ((p / 100.0) * (sorted.len().saturating_sub(1)) as f64).round() as usize;
    sorted.get(i).copied().unwrap_or_default()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
