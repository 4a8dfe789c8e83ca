//! SIGKILL the real binary three times, at random points, while 500 runs mixing steps, timers,
//! signals and children are in flight; restart it each time; then every run (and child) must
//! finish, every step's side effect must be applied exactly once per completed checkpoint, and
//! no step may have executed after its checkpoint completed.

mod common;

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::{Server, get_json, start_run, tempdir};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

const RUNS: usize = 500;
const KILLS: usize = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_three_times_under_500_mixed_runs_loses_nothing_and_applies_each_effect_once() {
    let seed: u64 = std::env::var("DURABLE_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    eprintln!("crash test seed: {seed} (set DURABLE_CRASH_SEED to replay it)");
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempdir();
    let effects = dir.join("effects");
    std::fs::create_dir_all(&effects).expect("effects dir");
    let mut server = Server::start(
        &dir,
        &[
            ("DURABLE_LEASE_SECS", "2".into()),
            ("DURABLE_DEMO_EFFECTS", effects.display().to_string()),
        ],
    )
    .await;
    let client = reqwest::Client::new();
    let token = server.token("acme");

    // Every fourth run waits for a signal, every other one has a child; timers and step
    // durations vary.
    let mut ids = Vec::with_capacity(RUNS);
    let mut waiting = Vec::new();
    for i in 0..RUNS {
        let input = json!({
            "sleep_ms": rng.gen_range(20..1500),
            "wait_signal": i % 4 == 0,
            "child": i % 2 == 0,
            "delay_ms": rng.gen_range(5..120),
        });
        let run = start_run(
            &client,
            &server,
            &token,
            json!({"workflow": "demo.tour", "input": input}),
        )
        .await;
        let id = run["id"].as_str().expect("id").to_owned();
        if i % 4 == 0 {
            waiting.push(id.clone());
        }
        ids.push(id);
    }

    // Signals go out at random moments throughout the kills (some before their run waits,
    // some while the server is down, retried until one lands).
    let done_signalling = Arc::new(AtomicBool::new(false));
    let signaller = {
        let (client, base, token, done) = (
            client.clone(),
            server.base.clone(),
            token.clone(),
            done_signalling.clone(),
        );
        let mut rng = StdRng::seed_from_u64(seed ^ 0x5eed);
        tokio::spawn(async move {
            for id in waiting {
                tokio::time::sleep(Duration::from_millis(rng.gen_range(0..25))).await;
                let url = format!("{base}/api/v1/runs/{id}/signal");
                loop {
                    let sent = client
                        .post(&url)
                        .bearer_auth(&token)
                        .json(&json!({"name": "approve", "payload": {"by": "crash-test"}}))
                        .send()
                        .await;
                    match sent {
                        Ok(r) if r.status().is_success() => break,
                        Ok(r) => panic!("signal to {id} refused: {}", r.status()),
                        Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                    }
                }
            }
            done.store(true, Ordering::SeqCst);
        })
    };

    for kill in 1..=KILLS {
        let pause = rng.gen_range(200..2500);
        tokio::time::sleep(Duration::from_millis(pause)).await;
        server.kill();
        eprintln!("SIGKILL {kill}/{KILLS} after {pause} ms");
        server.restart(&dir).await;
    }
    signaller.await.expect("signaller");
    assert!(done_signalling.load(Ordering::SeqCst));

    // Every run finishes, and so does every child.
    let details = wait_all_completed(&client, &server, &token, &ids).await;
    let child_ids: Vec<String> = details
        .values()
        .flat_map(|d| d["checkpoints"].as_array().cloned().unwrap_or_default())
        .filter(|cp| cp["kind"] == "child")
        .map(|cp| {
            let parent = cp["run_id"].as_str().expect("run_id");
            format!("{parent}.child.{}", cp["seq"])
        })
        .collect();
    assert_eq!(child_ids.len(), RUNS / 2, "every other run has one child");
    let children = wait_all_completed(&client, &server, &token, &child_ids).await;

    // Each run: reserve, timer, (signal), (child), charge — all completed.
    for (id, d) in &details {
        let kinds: Vec<&str> = d["checkpoints"]
            .as_array()
            .expect("checkpoints")
            .iter()
            .map(|cp| cp["kind"].as_str().expect("kind"))
            .collect();
        assert_eq!(kinds.first(), Some(&"remote_step"), "{id}: {kinds:?}");
        assert_eq!(kinds.get(1), Some(&"sleep"), "{id}: {kinds:?}");
        assert_eq!(kinds.last(), Some(&"remote_step"), "{id}: {kinds:?}");
    }

    // Side effects: applied once per completed remote-step checkpoint, for those and no other
    // step ids; and no execution of a step started after its checkpoint had completed.
    let executions = read_executions(&effects.join("executions.log"));
    let applied: HashSet<String> = std::fs::read_dir(effects.join("applied"))
        .expect("applied dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    let mut completed_steps = HashSet::new();
    for d in details.values().chain(children.values()) {
        for cp in d["checkpoints"].as_array().expect("checkpoints") {
            assert_eq!(cp["status"], "completed", "{cp}");
            if cp["kind"] != "remote_step" {
                continue;
            }
            let step_id = format!("{}:{}", cp["run_id"].as_str().expect("run_id"), cp["seq"]);
            let finished = cp["finished_at"].as_i64().expect("finished_at");
            let starts = executions
                .get(&step_id)
                .unwrap_or_else(|| panic!("{step_id} completed but never executed"));
            for started in starts {
                assert!(
                    *started <= finished,
                    "{step_id} executed at {started}, after its checkpoint completed at {finished}"
                );
            }
            completed_steps.insert(step_id);
        }
    }
    let missing: Vec<_> = completed_steps.difference(&applied).collect();
    let extra: Vec<_> = applied.difference(&completed_steps).collect();
    assert!(
        missing.is_empty(),
        "completed steps whose effect was never applied: {missing:?}"
    );
    assert!(
        extra.is_empty(),
        "effects applied for steps that did not complete: {extra:?}"
    );
    let total: usize = executions.values().map(Vec::len).sum();
    eprintln!(
        "{} runs + {} children; {} completed steps; {total} executions ({} re-deliveries of steps \
         caught in flight, each applied once)",
        details.len(),
        children.len(),
        completed_steps.len(),
        total - completed_steps.len()
    );
}

/// Polls until every run in `ids` is `completed` (two minutes at most) and returns each detail.
async fn wait_all_completed(
    client: &reqwest::Client,
    server: &Server,
    token: &str,
    ids: &[String],
) -> HashMap<String, Value> {
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut details: HashMap<String, Value> = HashMap::new();
    let mut open: Vec<&String> = ids.iter().collect();
    while !open.is_empty() && Instant::now() < deadline {
        let mut still = Vec::new();
        for id in open {
            let d = get_json(client, server, token, &format!("/api/v1/runs/{id}")).await;
            if d["run"]["status"] != "completed" {
                still.push(id);
            }
            details.insert(id.clone(), d);
        }
        open = still;
        if !open.is_empty() {
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
    let unfinished: Vec<_> = open
        .iter()
        .map(|id| (id, details[*id]["run"]["status"].clone()))
        .collect();
    assert!(
        unfinished.is_empty(),
        "runs did not complete after the crashes: {unfinished:?}"
    );
    details
}

/// `step_id` → the start time of each execution.
fn read_executions(path: &Path) -> HashMap<String, Vec<i64>> {
    let log = std::fs::read_to_string(path).expect("executions log");
    let mut executions: HashMap<String, Vec<i64>> = HashMap::new();
    for line in log.lines() {
        let mut fields = line.split('\t');
        let (Some(step_id), Some(at)) = (fields.next(), fields.next()) else {
            panic!("bad log line {line:?}");
        };
        executions
            .entry(step_id.to_owned())
            .or_default()
            .push(at.parse().expect("ms"));
    }
    executions
}
