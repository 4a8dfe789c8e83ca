//! The cluster over the wire: a `durable control-plane` (PostgreSQL + Redis) and separate
//! `durable worker --tenant bench` processes (release builds), driving `demo.order` (three
//! remote steps) started through the API. Side by side in one run:
//!
//! - the raw queue round trip on the same Redis (a task job out and a result job back through
//!   the BullMQ-layout queues, no engine, no database);
//! - one step's dispatch-to-result round trip through the engine: 1-step runs one at a time
//!   (p50/p99 of 300, start call to `run.completed`), and what each further step of a run costs;
//! - 3-step runs one at a time (p50/p99 of 300 after 20 unmeasured ones, start call to
//!   `run.completed` on the SSE stream, and the CPU each part of the cluster spent per run: one
//!   at a time, every hop wakes a sleeping process, which costs several times a burst's share);
//! - 2,000 3-step runs started at once (completed runs/s, and the CPU each part of the cluster
//!   spent per run).
//!
//! With `DURABLE_BENCH_CONNECTION=1` each run's charge step reads the tenant's connection
//! `pay` (the workers get the tenant's wire token and ask the control plane for it): beside a
//! run without it, the cost of resolving a connection.
//!
//! `cargo build --release -p durable-server && cargo run --release -p durable-bench --bin cluster [-- WORKERS BURST CONTROL_PLANES]`
//! (PostgreSQL on 127.0.0.1:5432 and Redis on 127.0.0.1:6379, or `DURABLE_TEST_POSTGRES` /
//! `DURABLE_TEST_REDIS`.)

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use durable::model::{Namespace, RemoteTask, RunId, StepOutcome, StepResult, v1_capabilities};
use durable::store::postgres_testing;
use durable::transport::redis_testing::{fresh_prefix, test_url};
use durable::transport::{Partitions, RedisConfig, RedisTransport, StepQueues, TaskSubscription};
use futures::StreamExt;
use serde_json::{Value, json};

use support::{BoxError, Proc, free_port, run, server_binary, wait_healthy};

/// Runs started one at a time before the measured ones.
const WARM_UP: usize = 20;

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let mut args = std::env::args().skip(1);
    let workers: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(2);
    let burst: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(2000);
    let control_planes: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(1);
    let sequential = 300;
    let paying = std::env::var_os("DURABLE_BENCH_CONNECTION").is_some();
    let order = move |i: usize| order_body(i, paying);

    let prefix = fresh_prefix();
    let raw = raw_round_trip(&prefix, 500).await?;

    let bin = server_binary()?;
    // `DURABLE_BENCH_DATABASE` swaps the store (a `sqlite://` file, say) to see its share.
    let db = match std::env::var("DURABLE_BENCH_DATABASE") {
        Ok(url) => url,
        Err(_) => postgres_testing::fresh_database()
            .await
            .ok_or("PostgreSQL is required (DURABLE_SKIP_POSTGRES is set)")?,
    };
    run(&bin, &["migrate"], &[("DATABASE_URL", db.as_str())])?;
    let token = run(
        &bin,
        &["token", "issue", "--tenant", "bench"],
        &[("DATABASE_URL", db.as_str())],
    )?;
    let port = free_port()?;
    let redis = test_url();
    let cluster = [
        ("REDIS_URL", redis.as_str()),
        ("DURABLE_PREFIX", prefix.as_str()),
    ];
    let wire_token = if paying {
        run(
            &bin,
            &["token", "issue", "--tenant", "bench", "--wire"],
            &[
                ("DATABASE_URL", db.as_str()),
                ("DURABLE_TENANT_SECRET", TENANT_SECRET),
            ],
        )?
    } else {
        String::new()
    };
    let mut worker_env = cluster.to_vec();
    if paying {
        worker_env.push(("DURABLE_WIRE_TOKEN", wire_token.trim()));
    }
    // Runs are started on each in turn, as a load balancer would; they share the database and
    // the queues, and each one's results come back to the control plane that sent its steps.
    let mut binds = vec![format!("127.0.0.1:{port}")];
    for _ in 1..control_planes.max(1) {
        binds.push(format!("127.0.0.1:{}", free_port()?));
    }
    let control_planes: Vec<Proc> = binds
        .iter()
        .map(|bind| {
            let mut cp_env = cluster.to_vec();
            cp_env.extend([
                ("DATABASE_URL", db.as_str()),
                ("DURABLE_BIND", bind.as_str()),
                ("DURABLE_TENANT_SECRET", TENANT_SECRET),
                ("DURABLE_MASTER_KEY", MASTER_KEY),
            ]);
            Proc::spawn(&bin, &["control-plane"], &cp_env)
        })
        .collect::<Result<_, _>>()?;
    let worker_pool: Vec<Proc> = (0..workers)
        .map(|_| {
            Proc::spawn(
                &bin,
                &["worker", "--tenant", "bench", "--concurrency", "256"],
                &worker_env,
            )
        })
        .collect::<Result<_, _>>()?;
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(128)
        .build()?;
    let bases: Vec<String> = binds.iter().map(|b| format!("http://{b}")).collect();
    for base in &bases {
        wait_healthy(&http, base).await?;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    if paying {
        http.put(format!("{}/api/v1/connections/pay", bases[0]))
            .bearer_auth(&token)
            .json(&json!({"kind": "secret", "values": {"api_key": "sk_bench"}}))
            .send()
            .await?
            .error_for_status()?;
    }

    let completions = Arc::new(Completions::default());
    completions.clone().listen(&http, &bases[0], &token).await?;

    let client = Client {
        http,
        bases,
        token,
        completions: completions.clone(),
        next: AtomicUsize::new(0),
    };
    // Not measured: the first runs pay for cold connections, caches and prepared statements on
    // every process.
    client
        .one_at_a_time(WARM_UP, |i| order(200_000 + i))
        .await?;

    // One at a time: 3-step runs, then 1-step runs (one step through the engine, start to end).
    let cpu_sequential = Cpu::read(&control_planes, &worker_pool);
    let latencies = client.one_at_a_time(sequential, order).await?;
    let cpu_sequential = Cpu::read(&control_planes, &worker_pool).since(&cpu_sequential);
    let pct = |q: f64| percentile(&latencies, q);
    let one_step = client.one_at_a_time(sequential, |_| one_step()).await?;

    // At once.
    let before = completions.count();
    let cpu_before = Cpu::read(&control_planes, &worker_pool);
    let t0 = Instant::now();
    futures::stream::iter(0..burst)
        .map(|i| {
            let client = &client;
            async move { client.start(order(100_000 + i)).await }
        })
        .buffer_unordered(64)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<Vec<_>, _>>()?;
    let accepted = t0.elapsed();
    let deadline = Instant::now() + Duration::from_secs(300);
    while completions.count() < before + burst {
        if Instant::now() > deadline {
            return Err(format!(
                "only {} of {burst} runs completed in 5 minutes",
                completions.count() - before
            )
            .into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let elapsed = t0.elapsed();
    let cpu = Cpu::read(&control_planes, &worker_pool).since(&cpu_before);
    let rss = control_planes.iter().map(Proc::rss_kib).max().unwrap_or(0);

    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let store = if db.starts_with("sqlite") {
        "SQLite"
    } else {
        "PostgreSQL"
    };
    println!(
        "\n## Cluster: {} control plane(s) ({store} + Redis) and {workers} worker processes, `demo.order` (3 steps{})\n",
        control_planes.len(),
        if paying {
            ", the charge reading connection `pay`"
        } else {
            ""
        }
    );
    println!("| measure | result |");
    println!("| --- | --- |");
    println!(
        "| raw queue round trip on the same Redis, p50 / p99 | {:.2} ms / {:.2} ms |",
        ms(raw.0),
        ms(raw.1)
    );
    println!(
        "| 1-step run one at a time (start, the step's trip, completion), p50 / p99 | {:.2} ms / {:.2} ms |",
        ms(percentile(&one_step, 0.50)),
        ms(percentile(&one_step, 0.99))
    );
    println!(
        "| each further step of a run, one at a time: (3-step p50 - 1-step p50) / 2 | {:.2} ms |",
        (ms(pct(0.50)) - ms(percentile(&one_step, 0.50))) / 2.0
    );
    println!(
        "| 3-step run one at a time, p50 | {:.2} ms |",
        ms(pct(0.50))
    );
    println!(
        "| 3-step run one at a time, p99 | {:.2} ms |",
        ms(pct(0.99))
    );
    println!(
        "| {burst} runs at once: completed | {:.0} runs/s |",
        burst as f64 / elapsed.as_secs_f64()
    );
    println!(
        "| {burst} runs at once: starts accepted (64 requests in flight) | {:.0} starts/s |",
        burst as f64 / accepted.as_secs_f64()
    );
    let per = |runs: usize| move |d: Duration| ms(d) / runs as f64;
    let per_run = per(sequential);
    println!(
        "| CPU per run one at a time: control planes / workers / PostgreSQL / Redis | {:.2} / {:.2} / {:.2} / {:.2} ms |",
        per_run(cpu_sequential.control_planes),
        per_run(cpu_sequential.workers),
        per_run(cpu_sequential.postgres),
        per_run(cpu_sequential.redis)
    );
    let per_run = per(burst);
    println!(
        "| CPU per run in the burst: control planes / workers / PostgreSQL / Redis | {:.2} / {:.2} / {:.2} / {:.2} ms |",
        per_run(cpu.control_planes),
        per_run(cpu.workers),
        per_run(cpu.postgres),
        per_run(cpu.redis)
    );
    println!(
        "| control-plane RSS after the burst (the largest) | {:.1} MiB |",
        rss as f64 / 1024.0
    );
    println!(
        "\nA 3-step run costs {:.1}x the raw round trip (p50): three round trips plus the database writes.",
        ms(pct(0.50)) / ms(raw.0).max(0.001)
    );
    Ok(())
}

/// CPU time used so far by each part of the cluster (Linux `/proc`; zero elsewhere).
struct Cpu {
    control_planes: Duration,
    workers: Duration,
    postgres: Duration,
    redis: Duration,
}

impl Cpu {
    fn read(control_planes: &[Proc], workers: &[Proc]) -> Self {
        Cpu {
            control_planes: control_planes.iter().map(Proc::cpu).sum(),
            workers: workers.iter().map(Proc::cpu).sum(),
            postgres: cpu_time_of("postgres"),
            redis: cpu_time_of("redis-server"),
        }
    }

    /// What each part used between `earlier` and this reading.
    fn since(&self, earlier: &Cpu) -> Cpu {
        Cpu {
            control_planes: self.control_planes.saturating_sub(earlier.control_planes),
            workers: self.workers.saturating_sub(earlier.workers),
            postgres: self.postgres.saturating_sub(earlier.postgres),
            redis: self.redis.saturating_sub(earlier.redis),
        }
    }
}

/// CPU time used so far by every live process whose command name is `comm` (`postgres` for
/// PostgreSQL's server and backends, `redis-server`).
fn cpu_time_of(comm: &str) -> Duration {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Duration::ZERO;
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == comm)
        })
        .map(support::cpu_time)
        .sum()
}

/// A task job out and a result job back through our Redis transport alone, one at a time.
async fn raw_round_trip(prefix: &str, n: usize) -> Result<(Duration, Duration), BoxError> {
    let transport = RedisTransport::connect(RedisConfig {
        prefix: format!("{prefix}raw"),
        ..RedisConfig::new(test_url())
    })
    .await?;
    let acme = Namespace::tenant("bench")?;
    let mut tasks = transport
        .consume_tasks(TaskSubscription {
            names: vec!["echo".into()],
            partitions: Partitions::Only(vec![acme.clone().into()]),
            concurrency: 1,
            workflows: Vec::new(),
            capabilities: v1_capabilities(),
        })
        .await?;
    let mut results = transport.consume_results().await?;
    let echo = transport.clone();
    tokio::spawn(async move {
        while let Some(task) = tasks.next().await {
            let reply_to = task.reply_to.clone();
            let result = StepResult {
                run_id: task.run_id,
                seq: task.seq,
                step_id: task.step_id,
                started_at: None,
                outcome: StepOutcome::Completed {
                    output: task.input.unwrap_or(Value::Null),
                },
                // Answered with the task's receipt, the task is settled with the result.
                receipt: task.receipt,
            };
            let _ = echo.publish_result(result, reply_to.as_deref()).await;
        }
    });
    let mut times = Vec::with_capacity(n);
    for i in 0..n {
        let run_id = RunId::parse(&format!("raw-{i}"))?;
        let t0 = Instant::now();
        transport
            .dispatch(RemoteTask {
                run_id: run_id.clone(),
                seq: 0,
                name: "echo".into(),
                step_id: format!("{run_id}:0"),
                group: format!("echo@{acme}"),
                input: Some(json!({ "i": i })),
                context: None,
                traceparent: None,
                attempt: 1,
                reply_to: None,
                priority: None,
                receipt: Default::default(),
            })
            .await?;
        results.next().await.ok_or("the result stream ended")?;
        times.push(t0.elapsed());
    }
    times.sort();
    Ok((percentile(&times, 0.50), percentile(&times, 0.99)))
}

/// Counts `run.completed` events of the bench tenant, and lets a caller wait for one run.
#[derive(Default)]
struct Completions {
    done: std::sync::Mutex<std::collections::HashSet<String>>,
    count: AtomicUsize,
    notify: tokio::sync::Notify,
}

impl Completions {
    async fn listen(
        self: Arc<Self>,
        http: &reqwest::Client,
        base: &str,
        token: &str,
    ) -> Result<(), BoxError> {
        let response = http
            .get(format!("{base}/api/v1/events"))
            .bearer_auth(token)
            .send()
            .await?
            .error_for_status()?;
        tokio::spawn(async move {
            let mut body = response.bytes_stream();
            let mut buf = String::new();
            while let Some(Ok(chunk)) = body.next().await {
                buf.push_str(&String::from_utf8_lossy(&chunk));
                while let Some(end) = buf.find("\n\n") {
                    let frame: String = buf.drain(..end + 2).collect();
                    for data in frame.lines().filter_map(|l| l.strip_prefix("data:")) {
                        let Ok(event) = serde_json::from_str::<Value>(data.trim()) else {
                            continue;
                        };
                        if event["type"] == "run.completed"
                            && let Some(id) = event["runId"].as_str()
                            && self
                                .done
                                .lock()
                                .map(|mut d| d.insert(id.to_owned()))
                                .unwrap_or(false)
                        {
                            self.count.fetch_add(1, Ordering::SeqCst);
                            self.notify.notify_waiters();
                        }
                    }
                }
            }
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        Ok(())
    }

    fn count(&self) -> usize {
        self.count.load(Ordering::SeqCst)
    }

    async fn wait(&self, id: &str) {
        loop {
            let notified = self.notify.notified();
            if self.done.lock().map(|d| d.contains(id)).unwrap_or(false) {
                return;
            }
            let _ = tokio::time::timeout(Duration::from_millis(50), notified).await;
        }
    }
}

/// The wire tokens' secret of the bench's control planes.
const TENANT_SECRET: &str = "bench-tenant-secret-of-at-least-thirty-two-bytes";

/// The master key of the bench's control planes (connections are sealed under it).
const MASTER_KEY: &str = "6265e063686d61737465726b65790000000000000000000000000000000000aa";

/// The `i`th `demo.order` start body (three remote steps, no delay); `paying`, the charge
/// reads connection `pay`.
fn order_body(i: usize, paying: bool) -> Value {
    let mut input = json!({ "item": format!("b-{i}"), "delay_ms": 0 });
    if paying {
        input["connection"] = json!("pay");
    }
    json!({ "workflow": "demo.order", "input": input })
}

/// A `demo.flaky` start body that succeeds: one remote step.
fn one_step() -> Value {
    json!({ "workflow": "demo.flaky", "input": { "ok": true } })
}

/// The `q` quantile of `sorted`.
fn percentile(sorted: &[Duration], q: f64) -> Duration {
    sorted[((sorted.len() as f64 * q) as usize).min(sorted.len() - 1)]
}

/// Starts runs through the API as the bench tenant, on each control plane in turn, and sees
/// them end on the first one's SSE stream.
struct Client {
    http: reqwest::Client,
    bases: Vec<String>,
    token: String,
    completions: Arc<Completions>,
    /// Which control plane the next start goes to.
    next: AtomicUsize,
}

impl Client {
    /// Starts the run `body` describes; its id.
    async fn start(&self, body: Value) -> Result<String, BoxError> {
        let base = &self.bases[self.next.fetch_add(1, Ordering::Relaxed) % self.bases.len()];
        let run: Value = self
            .http
            .post(format!("{base}/api/v1/runs"))
            .bearer_auth(&self.token)
            .json(&body)
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        Ok(run["id"].as_str().ok_or("no run id")?.to_owned())
    }

    /// Runs `n` runs one after the other (`body(i)` the `i`th); each one's time from the start
    /// call to its `run.completed` event, sorted.
    async fn one_at_a_time(
        &self,
        n: usize,
        body: impl Fn(usize) -> Value,
    ) -> Result<Vec<Duration>, BoxError> {
        let mut took = Vec::with_capacity(n);
        for i in 0..n {
            let t0 = Instant::now();
            let id = self.start(body(i)).await?;
            self.completions.wait(&id).await;
            took.push(t0.elapsed());
        }
        took.sort();
        Ok(took)
    }
}
