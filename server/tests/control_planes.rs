//! Three control-plane processes on one PostgreSQL database and 2,000 runs: they share the work
//! (each claims with `FOR UPDATE SKIP LOCKED`) and every run completes once, with every step
//! executed exactly once; and a tenant's concurrency ceiling holds across them, through a SIGKILL.

mod common;

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use common::{Server, cli, tempdir};
use durable::model::{Namespace, RunId, RunStatus, Scope};
use durable::runtime::{Clock, SystemClock};
use durable::store::{NewRun, PgStore, Plans, RunReads, Turns, postgres_testing};
use futures::StreamExt;
use serde_json::json;

const RUNS: usize = 2000;
const CONTROL_PLANES: usize = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_control_planes_on_one_database_complete_every_run_once() {
    let Some(url) = postgres_testing::fresh_database().await else {
        return;
    };
    cli(&url, &["migrate"]);
    // The runs are queued before any control plane runs, so every one is won by a claim.
    let store = PgStore::connect(&url).await.expect("connect");
    let acme = Namespace::tenant("acme").expect("ns");
    let now = SystemClock.now();
    let created: Vec<_> = futures::stream::iter(0..RUNS)
        .map(|i| {
            let new = NewRun::top_level(
                RunId::parse(&format!("cp-run-{i}")).expect("id"),
                acme.clone(),
                "demo.order",
                1,
                json!({ "delay_ms": 1 + i % 5 }),
            );
            store.create_run(new, now + i as i64, None)
        })
        .buffer_unordered(16)
        .collect()
        .await;
    assert!(created.iter().all(Result::is_ok), "queueing the runs");

    let effects = tempdir();
    let servers: Vec<Server> = futures::future::join_all((0..CONTROL_PLANES).map(|_| {
        let (url, effects) = (url.clone(), effects.display().to_string());
        async move {
            Server::start(
                &tempdir(),
                &[("DATABASE_URL", url), ("DURABLE_DEMO_EFFECTS", effects)],
            )
            .await
        }
    }))
    .await;

    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let counts = store.count_by_status(&Scope::All).await.expect("count");
        let completed = counts
            .iter()
            .find(|c| c.status == RunStatus::Completed)
            .map_or(0, |c| c.count);
        if completed == RUNS as u64 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "only {completed} of {RUNS} runs completed in 3 minutes: {counts:?}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    // Every step ran exactly once: no run was driven by two control planes.
    let log = std::fs::read_to_string(effects.join("executions.log")).expect("log");
    let mut per_step: HashMap<&str, usize> = HashMap::new();
    let mut pids = HashSet::new();
    for line in log.lines() {
        let mut fields = line.split('\t');
        let (Some(step), Some(_), Some(pid)) = (fields.next(), fields.next(), fields.next()) else {
            panic!("bad log line {line:?}");
        };
        *per_step.entry(step).or_default() += 1;
        pids.insert(pid.to_owned());
    }
    assert_eq!(per_step.len(), RUNS * 3, "three steps per run");
    let repeated: Vec<_> = per_step.iter().filter(|(_, n)| **n > 1).collect();
    assert!(repeated.is_empty(), "steps executed twice: {repeated:?}");
    assert_eq!(
        pids.len(),
        CONTROL_PLANES,
        "every control plane drove a share of the runs"
    );
    let per_cp: Vec<usize> = pids
        .iter()
        .map(|pid| {
            log.lines()
                .filter(|l| l.ends_with(&format!("\t{pid}")))
                .count()
        })
        .collect();
    eprintln!("{RUNS} runs, step executions per control plane: {per_cp:?}");
    drop(servers);
}

/// A tenant's concurrency ceiling holds across three control-plane processes on one database,
/// and through one of them being SIGKILLed mid-run: the count of its started runs never passes
/// the ceiling, the survivors take the dead one's runs over once their leases lapse, and when
/// every run has ended nothing is left counted (the count is of the runs themselves).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ceiling_holds_across_three_control_planes_and_a_sigkill() {
    const QUEUED: usize = 120;
    const CEILING: u64 = 4;
    let Some(url) = postgres_testing::fresh_database().await else {
        return;
    };
    cli(&url, &["migrate"]);
    cli(
        &url,
        &[
            "tenant",
            "plan",
            "set",
            "acme",
            "--max-concurrent-runs",
            &CEILING.to_string(),
        ],
    );
    let store = PgStore::connect(&url).await.expect("connect");
    let acme = Namespace::tenant("acme").expect("ns");
    let now = SystemClock.now();
    for i in 0..QUEUED {
        let new = NewRun::top_level(
            RunId::parse(&format!("capped-{i}")).expect("id"),
            acme.clone(),
            "demo.order",
            1,
            json!({ "delay_ms": 40 }),
        );
        store
            .create_run(new, now + i as i64, None)
            .await
            .expect("queue");
    }
    let mut servers: Vec<Server> = futures::future::join_all((0..CONTROL_PLANES).map(|_| {
        let url = url.clone();
        async move {
            Server::start(
                &tempdir(),
                &[("DATABASE_URL", url), ("DURABLE_LEASE_SECS", "2".into())],
            )
            .await
        }
    }))
    .await;

    let deadline = Instant::now() + Duration::from_secs(180);
    let mut killed = false;
    loop {
        let started = store.started(&acme).await.expect("count");
        assert!(
            started <= CEILING,
            "{started} of acme's runs started at once, over its ceiling of {CEILING}"
        );
        let usage = store.usage(&acme, SystemClock.now()).await.expect("usage");
        if !killed && usage.queued < (QUEUED as u64) * 2 / 3 {
            // A third of the way through, one control plane dies holding runs.
            servers[0].kill();
            killed = true;
        }
        if usage.queued == 0 && usage.running == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "acme's runs did not all end in 3 minutes: {usage:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(killed, "the kill happened mid-run");
    let counts = store.count_by_status(&Scope::All).await.expect("count");
    let completed = counts
        .iter()
        .find(|c| c.status == RunStatus::Completed)
        .map_or(0, |c| c.count);
    assert_eq!(completed, QUEUED as u64, "every run completed: {counts:?}");
    drop(servers);
}
