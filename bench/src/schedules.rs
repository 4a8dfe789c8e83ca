//! Schedule tick → run started, at 10,000 schedules across 100 tenants, side by side on both
//! stores (one engine each, the in-process transport):
//!
//! - **spread**: cron `S * * * * *` with `S` = the schedule's number mod 60, so about 167 ticks
//!   fall in every second of the minute measured;
//! - **burst**: `every 1m`, so all 10,000 fall on the same second;
//! - **spread beside a backlog**: the spread again while one tenant holds `BACKLOG` runs queued
//!   behind the turn slots: ticks are the engine's work and must not wait behind it.
//!
//! The latency of a tick is its run's `created_at` less the tick's time (`scheduled_at`).
//!
//! `cargo run --release -p durable-bench --bin schedules [-- SCHEDULES [BACKLOG]]`
//! (PostgreSQL at `DURABLE_TEST_POSTGRES` or 127.0.0.1:5432; skipped with
//! `DURABLE_SKIP_POSTGRES=1`.)

use std::sync::Arc;
use std::time::{Duration, Instant};

use durable::StartRun;
use durable::model::{
    Cadence, Interval, MAX_PAGE_SIZE, Millis, Namespace, Overlap, RunQuery, ScheduleId,
    ScheduleSpec, Scope,
};
use durable::prelude::*;
use durable::runtime::{Clock, SystemClock};
use durable::store::{PgStore, SqliteStore, Store, postgres_testing};
use durable::transport::MemoryTransport;
use futures::StreamExt;
use serde_json::{Value, json};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

const TENANTS: usize = 100;

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let mut args = std::env::args().skip(1);
    let schedules: usize = args
        .next()
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(10_000);
    let backlog: usize = args
        .next()
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(20_000);

    let mut table = vec![
        "| store | load | ticks started | not started | p50 | p95 | p99 | max |".to_owned(),
        "|---|---|---:|---:|---:|---:|---:|---:|".to_owned(),
    ];
    let dir = tempfile::tempdir()?;
    let sqlite: Arc<dyn Store> = Arc::new(
        SqliteStore::connect(&format!("sqlite://{}/schedules.db", dir.path().display())).await?,
    );
    table.extend(measure("sqlite", sqlite, schedules, backlog).await?);
    if std::env::var_os("DURABLE_SKIP_POSTGRES").is_none() {
        let url = postgres_testing::fresh_database()
            .await
            .ok_or("PostgreSQL is not reachable; set DURABLE_SKIP_POSTGRES=1 to skip it")?;
        let postgres: Arc<dyn Store> = Arc::new(PgStore::connect(&url).await?);
        table.extend(measure("postgres", postgres, schedules, backlog).await?);
    }
    println!("\n{}", table.join("\n"));
    Ok(())
}

fn registry() -> Registry {
    let mut r = Registry::new();
    r.workflow(
        "tick",
        1,
        |_ctx: WorkflowContext, input: Value| async move { Ok::<_, WorkflowError>(input) },
    );
    // A backlog's run: a local step that holds its turn slot for two seconds, so 20,000 of
    // them keep every slot busy for longer than the minute measured.
    r.workflow("chore", 1, |ctx: WorkflowContext, _: Value| async move {
        let _: Value = ctx
            .local_step("sleep", || async {
                tokio::time::sleep(Duration::from_secs(2)).await;
                Ok::<_, StepError>(Value::Null)
            })
            .await?;
        Ok::<_, WorkflowError>(Value::Null)
    });
    r
}

async fn measure(
    name: &str,
    store: Arc<dyn Store>,
    schedules: usize,
    backlog: usize,
) -> Result<Vec<String>, BoxError> {
    let engine = Engine::new(
        store.clone(),
        Arc::new(MemoryTransport::new()),
        Arc::new(registry()),
        EngineConfig::default(),
    );
    engine.start().await?;
    let mut rows = Vec::new();

    let spread = |i: usize| Cadence::Cron(format!("{} * * * * *", i % 60));
    let created = create(&engine, schedules, "spread", spread).await?;
    eprintln!("{name}: {schedules} spread schedules created in {created:.1} s");
    let latencies = one_minute(&store, "spread", schedules, next_minute()).await?;
    rows.push(row(name, "spread", schedules, &latencies));
    delete_all(&engine, schedules, "spread").await?;

    let burst = |_| Cadence::Every(Interval::from_millis(60_000));
    create(&engine, schedules, "burst", burst).await?;
    let latencies = one_minute(&store, "burst", schedules, next_minute()).await?;
    rows.push(row(name, "burst", schedules, &latencies));
    delete_all(&engine, schedules, "burst").await?;

    // The backlog arrives just before the minute measured, and outlasts it.
    create(&engine, schedules, "beside", spread).await?;
    let from = next_minute();
    let lead = (from - SystemClock.now() - 3_000).max(0);
    tokio::time::sleep(Duration::from_millis(lead as u64)).await;
    let noisy = Namespace::tenant("noisy")?;
    let t = Instant::now();
    futures::stream::iter(0..backlog)
        .map(|_| {
            engine.start_run(StartRun {
                workflow: "chore".into(),
                input: Value::Null,
                namespace: Some(noisy.clone()),
                ..StartRun::default()
            })
        })
        .buffer_unordered(64)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<Vec<_>, _>>()?;
    eprintln!(
        "{name}: a backlog of {backlog} runs queued in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let latencies = one_minute(&store, "beside", schedules, from).await?;
    let waiting = engine.usage(&noisy).await?;
    let load = format!(
        "spread beside {backlog} queued ({} still queued, {} running after it)",
        waiting.queued, waiting.running
    );
    rows.push(row(name, &load, schedules, &latencies));
    delete_all(&engine, schedules, "beside").await?;
    engine.shutdown().await;
    Ok(rows)
}

/// Creates `n` schedules `<prefix>-<i>` across the tenants; how long it took.
async fn create(
    engine: &Engine,
    n: usize,
    prefix: &str,
    cadence: impl Fn(usize) -> Cadence,
) -> Result<f64, BoxError> {
    let t = Instant::now();
    futures::stream::iter(0..n)
        .map(|i| {
            let spec = ScheduleSpec {
                workflow: "tick".into(),
                input: json!({ "i": i }),
                cadence: cadence(i),
                timezone: "UTC".into(),
                overlap: Overlap::AllowAll,
                catchup_window: ScheduleSpec::DEFAULT_CATCHUP,
                jitter: Interval::default(),
                paused: false,
            };
            let tenant = tenant(i);
            let id = ScheduleId::parse(&format!("{prefix}-{i}"));
            async move {
                engine
                    .create_schedule(&tenant, id?, spec)
                    .await
                    .map_err(BoxError::from)
            }
        })
        .buffer_unordered(32)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<Vec<_>, _>>()?;
    Ok(t.elapsed().as_secs_f64())
}

fn tenant(i: usize) -> Namespace {
    Namespace::tenant(&format!("t{:03}", i % TENANTS)).unwrap_or_else(|_| Namespace::default_ns())
}

async fn delete_all(engine: &Engine, n: usize, prefix: &str) -> Result<(), BoxError> {
    futures::stream::iter(0..n)
        .map(|i| async move {
            let id = ScheduleId::parse(&format!("{prefix}-{i}"))?;
            engine.delete_schedule(&tenant(i), &id).await?;
            Ok::<_, BoxError>(())
        })
        .buffer_unordered(32)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<Vec<_>, _>>()?;
    Ok(())
}

/// The start of the next whole minute.
fn next_minute() -> Millis {
    (SystemClock.now() / 60_000 + 1) * 60_000
}

/// The latencies of the ticks of schedules `<prefix>-*` in the minute from `from`, waiting
/// until every schedule has ticked once in it (a minute after it at most).
async fn one_minute(
    store: &Arc<dyn Store>,
    prefix: &str,
    n: usize,
    from: Millis,
) -> Result<Vec<Millis>, BoxError> {
    let now = SystemClock.now();
    let until = from + 60_000;
    let deadline = Instant::now() + Duration::from_millis((until - now) as u64 + 60_000);
    loop {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let latencies = latencies(store, prefix, from, until).await?;
        eprintln!("  {prefix}: {} of {n} ticks started", latencies.len());
        if latencies.len() >= n || Instant::now() > deadline {
            return Ok(latencies);
        }
    }
}

/// `created_at - tick` of every run a `<prefix>-*` schedule started for a tick in `[from, until)`.
async fn latencies(
    store: &Arc<dyn Store>,
    prefix: &str,
    from: Millis,
    until: Millis,
) -> Result<Vec<Millis>, BoxError> {
    let mut query = RunQuery {
        created_from: Some(from),
        limit: MAX_PAGE_SIZE,
        ..RunQuery::default()
    };
    let mut out = Vec::new();
    loop {
        let page = store.list_runs(&Scope::All, &query).await?;
        for run in &page.runs {
            let Some(schedule) = run
                .search_attributes
                .get("schedule")
                .and_then(Value::as_str)
            else {
                continue;
            };
            let Some(tick) = run
                .search_attributes
                .get("scheduled_at")
                .and_then(Value::as_str)
                .and_then(|at| chrono::DateTime::parse_from_rfc3339(at).ok())
                .map(|at| at.timestamp_millis())
            else {
                continue;
            };
            if schedule.starts_with(prefix) && (from..until).contains(&tick) {
                out.push(run.created_at - tick);
            }
        }
        match page.next_cursor {
            Some(next) => query.cursor = Some(next),
            None => return Ok(out),
        }
    }
}

fn row(store: &str, load: &str, expected: usize, latencies: &[Millis]) -> String {
    let mut sorted = latencies.to_vec();
    sorted.sort_unstable();
    let at = |q: f64| -> String {
        match sorted.len() {
            0 => "-".into(),
            n => format!("{} ms", sorted[((n as f64 * q) as usize).min(n - 1)]),
        }
    };
    format!(
        "| {store} | {load} | {} | {} | {} | {} | {} | {} |",
        sorted.len(),
        expected.saturating_sub(sorted.len()),
        at(0.50),
        at(0.95),
        at(0.99),
        at(1.0),
    )
}
