//! Live-event fan-out of the real server: `durable serve` (release build) on a fresh SQLite file,
//! N clients on its SSE stream (`/api/v1/events`, one tenant token), runs started through the
//! API. Measures, per delivered event, the time from the event's stamp to its arrival at a client,
//! with 1 subscriber and with N side by side; the server's RSS idle and under load; and the
//! hydrate bundle's size (wasm and JS, raw and gzip).
//!
//! `cargo build --release -p durable-server && cargo run --release -p durable-bench --bin sse_fanout [-- SUBSCRIBERS RUNS]`
//!
//! The server binary is `$DURABLE_BIN`, else `$CARGO_TARGET_DIR/release/durable`; the site
//! (for the bundle sizes) is `$LEPTOS_SITE_ROOT`, else `target/site`.

mod support;

use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use serde_json::{Value, json};

use support::{BoxError, Proc, free_port, run, server_binary, wait_healthy};

/// Runs are started in waves of this many, a pause apart, so the measure is delivery latency,
/// not a queue of starts.
const WAVE: usize = 10;

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let mut args = std::env::args().skip(1);
    let subscribers: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(1000);
    let runs: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(100);

    let bin = server_binary()?;
    let dir = tempfile::tempdir()?;
    let db = format!("sqlite://{}/bench.db", dir.path().display());
    let port = free_port()?;
    let base = format!("http://127.0.0.1:{port}");
    let bind = format!("127.0.0.1:{port}");
    let server = Proc::spawn(
        &bin,
        &["serve", "--demo"],
        &[
            ("DATABASE_URL", db.as_str()),
            ("DURABLE_BIND", bind.as_str()),
            ("DURABLE_DEMO_PASSWORD", "bench-password"),
        ],
    )?;
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(subscribers + 8)
        .build()?;
    wait_healthy(&http, &base).await?;
    let token = issue_token(&bin, &db)?;
    // Let the demo runs seeded at first start settle before measuring.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let idle_rss = server.rss_kib();

    let cpu_before = server.cpu();
    let single = measure(&http, &base, &token, 1, runs, &server).await?;
    let many = measure(&http, &base, &token, subscribers, runs, &server).await?;
    let cpu = server.cpu().saturating_sub(cpu_before);
    let bundle = bundle_sizes();

    println!(
        "\n## SSE fan-out: `durable serve` (SQLite, in-process transport), {runs} demo.order runs\n"
    );
    println!(
        "| subscribers | events/subscriber | deliveries | p50 | p99 | max | deliveries/s | server RSS under load |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    for r in [&single, &many] {
        println!(
            "| {} | {} | {} | {:.1} ms | {:.1} ms | {:.1} ms | {:.0} | {:.1} MiB |",
            r.subscribers,
            r.events_per_subscriber,
            r.deliveries,
            r.p50,
            r.p99,
            r.max,
            r.deliveries as f64 / r.elapsed.as_secs_f64(),
            r.peak_rss_kib as f64 / 1024.0
        );
    }
    println!(
        "\np99 with {} subscribers is {:.1}x the p99 with one. Server RSS idle: {:.1} MiB.",
        many.subscribers,
        many.p99 / single.p99.max(0.1),
        idle_rss as f64 / 1024.0
    );
    println!(
        "Server CPU over both measures: {:.2} s ({:.1} µs per delivery, runs included).",
        cpu.as_secs_f64(),
        cpu.as_secs_f64() * 1e6 / (single.deliveries + many.deliveries).max(1) as f64
    );
    println!(
        "Latency = arrival (client clock) − the event's `at` stamp (whole milliseconds, so up to 1 ms is rounding).\n"
    );
    println!("## Hydrate bundle\n");
    println!("| file | raw | gzip -9 |");
    println!("| --- | --- | --- |");
    for (name, raw, gz) in bundle {
        println!(
            "| {name} | {:.0} KiB | {:.0} KiB |",
            raw as f64 / 1024.0,
            gz as f64 / 1024.0
        );
    }
    drop(server);
    Ok(())
}

struct Outcome {
    subscribers: usize,
    events_per_subscriber: usize,
    deliveries: usize,
    p50: f64,
    p99: f64,
    max: f64,
    elapsed: Duration,
    peak_rss_kib: u64,
}

/// Opens `subscribers` streams, starts `runs` runs, and waits until every stream has seen every
/// run complete.
async fn measure(
    http: &reqwest::Client,
    base: &str,
    token: &str,
    subscribers: usize,
    runs: usize,
    server: &Proc,
) -> Result<Outcome, BoxError> {
    let latencies: Arc<Mutex<Vec<f64>>> = Arc::new(Mutex::new(Vec::new()));
    let (done_tx, mut done_rx) = tokio::sync::mpsc::unbounded_channel::<usize>();
    let marker = format!("fanout-{}", now_ms());
    let mut readers = Vec::with_capacity(subscribers);
    let (ready_tx, mut ready_rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    for _ in 0..subscribers {
        let response = http
            .get(format!("{base}/api/v1/events"))
            .bearer_auth(token)
            .send()
            .await?
            .error_for_status()?;
        let latencies = latencies.clone();
        let done_tx = done_tx.clone();
        let ready_tx = ready_tx.clone();
        readers.push(tokio::spawn(async move {
            let _ = ready_tx.send(());
            let mut body = response.bytes_stream();
            let mut buf = String::new();
            let mut mine = Vec::new();
            let mut completed = 0usize;
            let mut events = 0usize;
            while let Some(Ok(chunk)) = body.next().await {
                let arrived = now_ms_f64();
                buf.push_str(&String::from_utf8_lossy(&chunk));
                while let Some(end) = buf.find("\n\n") {
                    let frame: String = buf.drain(..end + 2).collect();
                    for line in frame.lines() {
                        let Some(data) = line.strip_prefix("data:") else {
                            continue;
                        };
                        let Ok(event) = serde_json::from_str::<Value>(data.trim()) else {
                            continue;
                        };
                        if event["workflow"] != "demo.order" {
                            continue;
                        }
                        if let Some(at) = event["at"].as_f64() {
                            mine.push(arrived - at);
                            events += 1;
                        }
                        if event["type"] == "run.completed" {
                            completed += 1;
                        }
                    }
                }
                if completed >= runs {
                    break;
                }
            }
            latencies.lock().map(|mut l| l.extend(mine)).ok();
            let _ = done_tx.send(events);
        }));
    }
    drop(done_tx);
    for _ in 0..subscribers {
        ready_rx.recv().await;
    }
    // Every stream is attached before the first event.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let t0 = Instant::now();
    let mut peak = server.rss_kib();
    for wave in 0..runs.div_ceil(WAVE) {
        for i in 0..WAVE.min(runs - wave * WAVE) {
            http.post(format!("{base}/api/v1/runs"))
                .bearer_auth(token)
                .json(&json!({
                    "workflow": "demo.order",
                    "input": { "item": format!("{marker}-{wave}-{i}"), "delay_ms": 0 },
                }))
                .send()
                .await?
                .error_for_status()?;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        peak = peak.max(server.rss_kib());
    }
    let mut per_subscriber = Vec::with_capacity(subscribers);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    while per_subscriber.len() < subscribers {
        tokio::select! {
            got = done_rx.recv() => match got {
                Some(n) => per_subscriber.push(n),
                None => break,
            },
            _ = tokio::time::sleep_until(deadline) => {
                return Err(format!("only {} of {subscribers} subscribers saw every run complete within 2 minutes", per_subscriber.len()).into());
            }
            _ = tokio::time::sleep(Duration::from_millis(100)) => {
                peak = peak.max(server.rss_kib());
            }
        }
    }
    let elapsed = t0.elapsed();
    for r in readers {
        r.abort();
    }
    let mut all = std::mem::take(&mut *latencies.lock().map_err(|_| "poisoned")?);
    all.sort_by(f64::total_cmp);
    let pick = |q: f64| {
        all.get(((all.len() as f64 * q) as usize).min(all.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0.0)
    };
    Ok(Outcome {
        subscribers,
        events_per_subscriber: per_subscriber.iter().copied().max().unwrap_or(0),
        deliveries: all.len(),
        p50: pick(0.50),
        p99: pick(0.99),
        max: all.last().copied().unwrap_or(0.0),
        elapsed,
        peak_rss_kib: peak,
    })
}

fn issue_token(bin: &Path, db: &str) -> Result<String, BoxError> {
    run(
        bin,
        &["token", "issue", "--tenant", "acme"],
        &[("DATABASE_URL", db)],
    )
}

/// `(file, raw bytes, gzip -9 bytes)` of the hydrate bundle.
fn bundle_sizes() -> Vec<(String, u64, u64)> {
    let root = std::env::var("LEPTOS_SITE_ROOT").unwrap_or_else(|_| "target/site".into());
    let pkg = Path::new(&root).join("pkg");
    [
        "durable_bg.wasm",
        "durable.wasm",
        "durable.js",
        "durable.css",
    ]
    .iter()
    .filter_map(|name| {
        let path = pkg.join(name);
        let raw = std::fs::metadata(&path).ok()?.len();
        let gz = Command::new("gzip")
            .args(["-9", "-c"])
            .arg(&path)
            .output()
            .ok()
            .map(|o| o.stdout.len() as u64)?;
        Some(((*name).to_owned(), raw, gz))
    })
    .collect()
}

fn now_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or_default()
}

fn now_ms_f64() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64() * 1000.0)
        .unwrap_or_default()
}
