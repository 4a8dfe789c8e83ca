//! Chaos on a cluster: two control planes on PostgreSQL and Redis, a pool of our Rust workers
//! and one of the unmodified Python `durable-worker`, while runs of a Rust workflow (steps on the
//! Rust pool) and of a Python workflow (turns and steps on the Python pool) are started. Every
//! few seconds one process is SIGKILLed and restarted, or a worker is paused (SIGSTOP) past its
//! liveness and resumed. Afterwards:
//!
//! - nothing accepted is lost or stuck: every run completes;
//! - nothing runs again once its result is recorded: no step execution starts after its
//!   checkpoint completed. A step whose worker died or paused mid-way runs twice, which
//!   at-least-once delivery allows, but on our workers never after its result exists. The one
//!   exception is counted, not failed: a Python worker paused mid-step that comes back finishes
//!   its step and may then take the copy that went back (the SDK cannot tell it is stale);
//! - nothing is left counted or held: the tenant's usage is zero, no job is held by a taker or
//!   active on a worker, no queue has a job left;
//! - one job per try: no task job was added twice (a redispatch after a lost job would add it).
//!
//! `make test` runs one round of each action (`CHAOS_SECONDS`, default 45); `make chaos` runs ten
//! minutes. `CHAOS_SEED` replays an order. The report goes to stderr.

mod common;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{PythonWorker, Server, WorkerProcess, cli, tempdir};
use durable::model::{CheckpointKind, CheckpointStatus, Namespace, RunId, RunStatus, Scope};
use durable::runtime::{Clock, SystemClock};
use durable::store::{PgStore, Plans, RunReads, postgres_testing};
use durable::transport::RedisTransport;
use durable::transport::redis_testing::{fresh_transport, python, scan_keys, task_adds, test_url};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde_json::json;

/// One thing done to the cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Action {
    KillControlPlane,
    KillRustWorker,
    KillPythonWorker,
    PauseRustWorker,
    PausePythonWorker,
}

const ACTIONS: [Action; 5] = [
    Action::KillControlPlane,
    Action::KillRustWorker,
    Action::KillPythonWorker,
    Action::PauseRustWorker,
    Action::PausePythonWorker,
];

/// The processes under test, restarted in place.
struct Cluster {
    control_planes: Vec<(Server, PathBuf)>,
    rust_worker: WorkerProcess,
    python_worker: PythonWorker,
    worker_env: Vec<(&'static str, String)>,
    python: String,
    /// The Python worker paused: its pid and when the pause began and ended.
    python_pauses: Vec<(String, i64, i64)>,
}

impl Cluster {
    async fn act(&mut self, action: Action, rng: &mut rand::rngs::StdRng) {
        match action {
            Action::KillControlPlane => {
                let i = rng.gen_range(0..self.control_planes.len());
                let (server, dir) = &mut self.control_planes[i];
                server.kill();
                tokio::time::sleep(Duration::from_millis(rng.gen_range(500..3000))).await;
                server.restart(dir).await;
            }
            Action::KillRustWorker => {
                self.rust_worker = {
                    let _ = self.rust_worker.child.kill();
                    let _ = self.rust_worker.child.wait();
                    tokio::time::sleep(Duration::from_millis(rng.gen_range(500..2000))).await;
                    WorkerProcess::start("acme", &self.worker_env)
                };
            }
            Action::KillPythonWorker => {
                self.python_worker.kill();
                tokio::time::sleep(Duration::from_millis(rng.gen_range(500..2000))).await;
                self.python_worker = start_python(&self.python, &self.worker_env).await;
            }
            Action::PauseRustWorker => {
                let pid = self.rust_worker.pid();
                // Past the 6 s a taker's liveness key outlives it.
                pause(&pid, Duration::from_millis(rng.gen_range(9_000..14_000))).await;
            }
            Action::PausePythonWorker => {
                let pid = self.python_worker.pid().to_string();
                let began = SystemClock.now();
                // Past the 15 s after which its liveness value counts as lapsed, and its locks'
                // renewal.
                pause(&pid, Duration::from_millis(rng.gen_range(20_000..25_000))).await;
                self.python_pauses.push((pid, began, SystemClock.now()));
            }
        }
    }
}

async fn start_python(python: &str, env: &[(&'static str, String)]) -> PythonWorker {
    let (python, env) = (python.to_owned(), env.to_vec());
    tokio::task::spawn_blocking(move || PythonWorker::start(&python, "chaos_worker.py", &env))
        .await
        .expect("start the Python worker")
}

/// SIGSTOP `pid` for `how_long`, then SIGCONT.
async fn pause(pid: &str, how_long: Duration) {
    let signal = |s: &str| {
        std::process::Command::new("kill")
            .args([s, pid])
            .status()
            .expect("kill")
    };
    signal("-STOP");
    tokio::time::sleep(how_long).await;
    signal("-CONT");
}

/// One step execution a worker logged.
struct Execution {
    step: String,
    started_ms: i64,
    pid: String,
    python: bool,
}

/// Every step execution the workers logged.
fn executions(effects: &Path) -> Vec<Execution> {
    [("executions.log", false), ("python-executions.log", true)]
        .iter()
        .filter_map(|(f, python)| Some((std::fs::read_to_string(effects.join(f)).ok()?, *python)))
        .flat_map(|(log, python)| {
            log.lines()
                .map(|line| {
                    let fields: Vec<&str> = line.split('\t').collect();
                    let [step, started, pid] = fields[..] else {
                        panic!("bad log line {line:?}");
                    };
                    Execution {
                        step: step.to_owned(),
                        started_ms: started.parse().expect("a time"),
                        pid: pid.to_owned(),
                        python,
                    }
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Keys matching `pattern` with how many entries each holds (`HLEN` for hashes, `LLEN` for
/// lists, `ZCARD` for sorted sets).
async fn entries(transport: &RedisTransport, pattern: &str) -> Vec<(String, i64)> {
    let client = redis::Client::open(test_url()).expect("url");
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .expect("redis");
    let mut out = Vec::new();
    for key in scan_keys(transport, pattern).await.expect("scan") {
        let kind: String = redis::cmd("TYPE")
            .arg(&key)
            .query_async(&mut conn)
            .await
            .expect("type");
        let count = match kind.as_str() {
            "hash" => "HLEN",
            "list" => "LLEN",
            "zset" => "ZCARD",
            _ => continue,
        };
        let n: i64 = redis::cmd(count)
            .arg(&key)
            .query_async(&mut conn)
            .await
            .expect("count");
        out.push((key, n));
    }
    out
}

/// Every event `stream` holds for `job`, with the time Redis stamped it (ms), in order.
async fn job_events(stream: &str, job: &str) -> Vec<String> {
    let client = redis::Client::open(test_url()).expect("url");
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .expect("redis");
    let entries: Vec<(String, Vec<(String, String)>)> = redis::cmd("XRANGE")
        .arg(stream)
        .arg("-")
        .arg("+")
        .query_async(&mut conn)
        .await
        .expect("xrange");
    entries
        .into_iter()
        .filter(|(_, fields)| fields.iter().any(|(k, v)| k == "jobId" && v == job))
        .map(|(id, fields)| {
            let at = id.split('-').next().unwrap_or(&id).to_owned();
            let fields: Vec<String> = fields
                .into_iter()
                .filter(|(k, _)| k != "jobId")
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            format!("{at} {}", fields.join(" "))
        })
        .collect()
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_loses_nothing_reruns_nothing_and_leaves_nothing_held() {
    let Some(transport) = fresh_transport().await else {
        return;
    };
    let Some(url) = postgres_testing::fresh_database().await else {
        return;
    };
    let Some(python) = python() else {
        return;
    };
    let seconds: u64 = std::env::var("CHAOS_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(45);
    let seed: u64 = std::env::var("CHAOS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| SystemClock.now() as u64);
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    cli(&url, &["migrate"]);
    let effects = tempdir();
    let prefix = transport.prefix().to_owned();
    let worker_env = vec![
        ("REDIS_URL", test_url()),
        ("DURABLE_PREFIX", prefix.clone()),
        ("DURABLE_DEMO_EFFECTS", effects.display().to_string()),
    ];
    let mut cp_env = worker_env.clone();
    cp_env.push(("DATABASE_URL", url.clone()));
    let mut control_planes = Vec::new();
    for _ in 0..2 {
        let dir = tempdir();
        control_planes.push((
            Server::start_role(&dir, "control-plane", &cp_env).await,
            dir,
        ));
    }
    let token = control_planes[0].0.token("acme");
    let bases: Vec<String> = control_planes.iter().map(|(s, _)| s.base.clone()).collect();
    let mut cluster = Cluster {
        rust_worker: WorkerProcess::start("acme", &worker_env),
        python_worker: start_python(&python, &worker_env).await,
        control_planes,
        worker_env,
        python: python.clone(),
        python_pauses: Vec::new(),
    };

    // Starts, every 150 ms, on whichever control plane answers.
    let accepted: Arc<Mutex<Vec<(RunId, Instant)>>> = Arc::default();
    let starting = Arc::new(AtomicBool::new(true));
    let starter = {
        let (accepted, starting, token) = (accepted.clone(), starting.clone(), token.clone());
        tokio::spawn(async move {
            let client = reqwest::Client::builder()
                .timeout(Duration::from_secs(5))
                .build()
                .expect("client");
            let mut n = 0usize;
            while starting.load(Ordering::Relaxed) {
                n += 1;
                let body = if n.is_multiple_of(2) {
                    json!({ "workflow": "demo.order", "input": { "delay_ms": 20 + n % 200 } })
                } else {
                    json!({ "workflow": "chaos.ledger", "input": { "ms": 20 + n % 200 } })
                };
                for base in [&bases[n % 2], &bases[(n + 1) % 2]] {
                    let sent = client
                        .post(format!("{base}/api/v1/runs"))
                        .bearer_auth(&token)
                        .json(&body)
                        .send()
                        .await;
                    if let Ok(answer) = sent
                        && answer.status() == reqwest::StatusCode::CREATED
                    {
                        let run: serde_json::Value = answer.json().await.expect("a run");
                        let id = RunId::parse(run["id"].as_str().expect("id")).expect("id");
                        accepted
                            .lock()
                            .expect("accepted")
                            .push((id, Instant::now()));
                        break;
                    }
                }
                tokio::time::sleep(Duration::from_millis(150)).await;
            }
        })
    };

    // At least one round of every action, in a shuffled order, for as long as asked.
    let chaos_started = Instant::now();
    let mut done: Vec<(Action, f64)> = Vec::new();
    // When each action began (ms), for the evidence a failure prints.
    let mut timeline: Vec<(Action, i64)> = Vec::new();
    while done.len() < ACTIONS.len() || chaos_started.elapsed() < Duration::from_secs(seconds) {
        let mut round = ACTIONS;
        round.shuffle(&mut rng);
        for action in round {
            tokio::time::sleep(Duration::from_millis(rng.gen_range(1000..3000))).await;
            let began = Instant::now();
            timeline.push((action, SystemClock.now()));
            cluster.act(action, &mut rng).await;
            done.push((action, began.elapsed().as_secs_f64()));
        }
    }
    starting.store(false, Ordering::Relaxed);
    starter.await.expect("the starter");
    let chaos_took = chaos_started.elapsed();

    // Everything accepted completes.
    let store = PgStore::connect(&url).await.expect("store");
    let accepted = accepted.lock().expect("accepted").clone();
    assert!(!accepted.is_empty(), "no run was accepted");
    let settle_started = Instant::now();
    let deadline = settle_started + Duration::from_secs(240);
    let mut latencies = Vec::new();
    let mut pending: Vec<&(RunId, Instant)> = accepted.iter().collect();
    while !pending.is_empty() {
        let mut still = Vec::new();
        for entry in pending {
            let run = store
                .get_run(&Scope::All, &entry.0)
                .await
                .expect("read")
                .unwrap_or_else(|| panic!("accepted run {} was lost", entry.0));
            match run.status {
                RunStatus::Completed => latencies.push(
                    (run.finished_at.unwrap_or(run.updated_at) - run.created_at) as f64 / 1000.0,
                ),
                RunStatus::Failed | RunStatus::Cancelled => {
                    panic!("run {} ended {:?}: {:?}", run.id, run.status, run.error)
                }
                _ => still.push(entry),
            }
        }
        pending = still;
        if !pending.is_empty() {
            assert!(
                Instant::now() < deadline,
                "{} of {} runs stuck 240 s after the chaos (seed {seed}): {:?}",
                pending.len(),
                accepted.len(),
                pending.iter().take(5).map(|e| &e.0).collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
    let settled = settle_started.elapsed();

    // Nothing ran again once its result was recorded.
    let mut completed_at: HashMap<String, i64> = HashMap::new();
    for (id, _) in &accepted {
        for cp in store
            .checkpoints(&Scope::All, id)
            .await
            .expect("checkpoints")
        {
            if cp.kind == CheckpointKind::RemoteStep
                && cp.status == CheckpointStatus::Completed
                && let Some(at) = cp.finished_at
            {
                completed_at.insert(format!("{}:{}", cp.run_id, cp.seq), at);
            }
        }
    }
    let executions = executions(&effects);
    let mut per_step: HashMap<&str, Vec<&Execution>> = HashMap::new();
    for e in &executions {
        per_step.entry(e.step.as_str()).or_default().push(e);
    }
    // A Python execution interrupted by a pause of its worker while the SDK still held its job:
    // taken before the pause (its handler may start only once the pause is over), and its
    // result not recorded before the pause, or only in the moment after, when the SDK has sent
    // the result but not yet finished the job (a control plane records a result within
    // milliseconds of its sending). The job, still active, goes back once the worker's liveness
    // lapses, and the step may run once more, on the same process or on another Python worker
    // that takes the copy that went back: the SDK cannot tell its own copy is stale, nor withdraw
    // the one that went back, as our workers do.
    const SDK_FINISHING_MS: i64 = 1_000;
    // How soon after a pause a job the SDK took before it starts running (a loaded 2-core
    // machine was seen taking 1.9 s).
    const RESUMING_MS: i64 = 3_000;
    let interrupted = |e: &Execution, done_at: i64| {
        e.python
            && e.started_ms <= done_at
            && cluster.python_pauses.iter().any(|(pid, began, ended)| {
                *pid == e.pid
                    && *began <= done_at + SDK_FINISHING_MS
                    && *ended + RESUMING_MS >= e.started_ms
            })
    };
    let (mut reruns, mut explained) = (Vec::new(), 0);
    for (step, runs) in &per_step {
        let Some(&done_at) = completed_at.get(*step) else {
            continue;
        };
        for late in runs.iter().filter(|e| e.started_ms > done_at) {
            if late.python && runs.iter().any(|e| interrupted(e, done_at)) {
                explained += 1;
            } else {
                let all: Vec<(i64, &str)> = runs
                    .iter()
                    .map(|e| (e.started_ms, e.pid.as_str()))
                    .collect();
                reruns.push(format!(
                    "{step} ({}, pid {}) {} ms after its result was recorded at {done_at}; every execution (ms, pid): {all:?}",
                    if late.python { "python" } else { "rust" },
                    late.pid,
                    late.started_ms - done_at,
                ));
            }
        }
    }
    let twice = per_step.values().filter(|runs| runs.len() > 1).count();
    assert!(
        reruns.is_empty(),
        "steps ran again after their result was recorded (seed {seed}): {reruns:#?}; python pauses (pid, began, ended): {:?}",
        cluster.python_pauses
    );
    let unexecuted: HashSet<&String> = completed_at
        .keys()
        .filter(|k| !per_step.contains_key(k.as_str()))
        .collect();
    assert!(
        unexecuted.is_empty(),
        "steps completed with no execution: {unexecuted:?}"
    );

    // One job per try: no task job was added twice, as the redispatch of a step whose job was
    // lost would add it (its 30 s window would hide a loss from the checks above).
    let added = task_adds(&transport).await.expect("task adds");
    let readded: Vec<_> = added.iter().filter(|(_, n)| **n > 1).collect();
    assert!(!added.is_empty(), "no task job was seen being added");
    if !readded.is_empty() {
        let mut evidence = String::new();
        for (key, _) in &readded {
            let (stream, job) = key.rsplit_once('/').expect("stream/job");
            evidence.push_str(&format!("\n{key}:\n"));
            for line in job_events(stream, job).await {
                evidence.push_str(&format!("  {line}\n"));
            }
            // The job id is `<run>@<seq>@<try>` (`~` for a `:` in the run id); steps are
            // keyed `<run>:<seq>` as the workers log them.
            let step = job
                .rsplit_once('@')
                .and_then(|(step, _)| step.rsplit_once('@'))
                .map_or_else(
                    || job.to_owned(),
                    |(run, seq)| format!("{}:{seq}", run.replace('~', ":")),
                );
            let step = step.as_str();
            for e in per_step.get(step).into_iter().flatten() {
                evidence.push_str(&format!(
                    "  executed at {} on {} ({})\n",
                    e.started_ms,
                    e.pid,
                    if e.python { "python" } else { "rust" }
                ));
            }
            evidence.push_str(&format!(
                "  result recorded at {:?}\n",
                completed_at.get(step)
            ));
        }
        panic!("task jobs added again (seed {seed}); actions {timeline:?}:{evidence}");
    }

    // Nothing left counted or held. Taker keys of killed processes lapse within seconds and
    // what they held goes back, so this is waited for briefly.
    let acme = Namespace::tenant("acme").expect("ns");
    let usage = store.usage(&acme, SystemClock.now()).await.expect("usage");
    assert_eq!((usage.running, usage.queued), (0, 0), "{usage:?}");
    let mut left = Vec::new();
    for _ in 0..40 {
        left = [
            format!("{prefix}-taken:*"),
            format!("bull:{prefix}-*:active"),
            format!("bull:{prefix}-*:wait"),
            format!("bull:{prefix}-*:prioritized"),
            format!("bull:{prefix}-*:paused"),
        ]
        .iter()
        .map(|pattern| entries(&transport, pattern))
        .collect::<futures::future::JoinAll<_>>()
        .await
        .into_iter()
        .flatten()
        .filter(|(_, n)| *n > 0)
        .collect::<Vec<_>>();
        if left.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(left.is_empty(), "left held or queued: {left:?}");

    latencies.sort_by(f64::total_cmp);
    let mut counts: HashMap<Action, (usize, f64)> = HashMap::new();
    for (action, took) in &done {
        let entry = counts.entry(*action).or_default();
        entry.0 += 1;
        entry.1 += took;
    }
    eprintln!("chaos report (seed {seed})");
    eprintln!("| | |\n|---|---|");
    eprintln!("| chaos | {:.0} s |", chaos_took.as_secs_f64());
    for action in ACTIONS {
        let (n, took) = counts.get(&action).copied().unwrap_or_default();
        eprintln!("| {action:?} | {n} ({took:.0} s) |");
    }
    eprintln!("| runs accepted and completed | {} |", accepted.len());
    eprintln!(
        "| run latency p50 / p99 / max | {:.1} / {:.1} / {:.1} s |",
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99),
        percentile(&latencies, 1.0)
    );
    eprintln!(
        "| settled after the chaos | {:.1} s |",
        settled.as_secs_f64()
    );
    eprintln!(
        "| step executions | {} for {} steps |",
        executions.len(),
        completed_at.len()
    );
    eprintln!("| steps run twice (overlapping a kill or pause) | {twice} |");
    eprintln!(
        "| steps run again after their result was recorded | 0 (+{explained} by a Python worker paused mid-step) |"
    );
    eprintln!("| task jobs added twice | 0 of {} |", added.len());
    eprintln!("| left counted, held or queued | 0 |");
    drop(cluster);
}
