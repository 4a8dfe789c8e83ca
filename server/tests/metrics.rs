//! `/metrics` against the real binary: an operator token reads it (nothing else does), and after
//! a known workload its counts are exact: runs started and finished by tenant and workflow, runs
//! by status, and one step-duration sample per step run. The store keeps the run counts, so
//! they read the same after a restart.

mod common;

use common::{Sample, Server, metric_value as value, scrape, start_run, tempdir, wait_status};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_a_known_workload_exactly_for_an_operator_only() {
    let dir = tempdir();
    let mut server = Server::start(&dir, &[]).await;
    let client = reqwest::Client::new();
    let (acme, globex, operator) = (
        server.token("acme"),
        server.token("globex"),
        server.operator_token(),
    );

    for (token, expected) in [
        (None, 401),
        (Some("dtk_nope_nope"), 401),
        (Some(&*acme), 403),
    ] {
        let mut get = client.get(server.url("/metrics"));
        if let Some(token) = token {
            get = get.bearer_auth(token);
        }
        let answer = get.send().await.expect("GET /metrics");
        assert_eq!(answer.status(), expected, "{token:?}");
        assert!(
            !answer.text().await.expect("body").contains("durable_runs"),
            "no metric leaks to {token:?}"
        );
    }

    let mut waits = Vec::new();
    for (token, body, status) in [
        (
            &acme,
            json!({"workflow": "demo.order", "input": {"delay_ms": 0}}),
            "completed",
        ),
        (
            &acme,
            json!({"workflow": "demo.order", "input": {"delay_ms": 0}}),
            "completed",
        ),
        (
            &acme,
            json!({"workflow": "demo.order", "input": {"delay_ms": 0}}),
            "completed",
        ),
        (
            &acme,
            json!({"workflow": "demo.flaky", "input": {"ok": false}}),
            "failed",
        ),
        (
            &globex,
            json!({"workflow": "demo.order", "input": {"delay_ms": 0}}),
            "completed",
        ),
    ] {
        let run = start_run(&client, &server, token, body).await;
        let id = run["id"].as_str().expect("id").to_owned();
        waits.push((token, id, status));
    }
    for (token, id, status) in &waits {
        let last = wait_status(&client, &server, token, id, status).await;
        assert_eq!(last["run"]["status"], *status, "{last}");
    }
    // The failed demo.flaky's dead letter runs demo.alert.
    let flaky = &waits[3].1;
    let alert = format!("{flaky}.dead-letter");
    let last = wait_status(&client, &server, &acme, &alert, "completed").await;
    assert_eq!(last["run"]["status"], "completed", "{last}");

    // (metric, tenant, workflow, status, value)
    let expected = [
        (
            "durable_runs_started_total",
            "acme",
            "demo.order",
            None,
            3.0,
        ),
        (
            "durable_runs_finished_total",
            "acme",
            "demo.order",
            Some("completed"),
            3.0,
        ),
        ("durable_runs", "acme", "demo.order", Some("completed"), 3.0),
        (
            "durable_runs_finished_total",
            "acme",
            "demo.flaky",
            Some("failed"),
            1.0,
        ),
        ("durable_runs", "acme", "demo.flaky", Some("failed"), 1.0),
        (
            "durable_runs_started_total",
            "acme",
            "demo.alert",
            None,
            1.0,
        ),
        (
            "durable_runs_started_total",
            "globex",
            "demo.order",
            None,
            1.0,
        ),
        (
            "durable_runs",
            "globex",
            "demo.order",
            Some("completed"),
            1.0,
        ),
    ];
    let check = |all: &[Sample], moment: &str| {
        for (name, tenant, workflow, status, n) in expected {
            let mut labels = vec![("tenant", tenant), ("workflow", workflow)];
            labels.extend(status.map(|s| ("status", s)));
            assert_eq!(
                value(all, name, &labels),
                Some(n),
                "{moment}: {name} {labels:?}"
            );
        }
        assert!(
            all.iter().all(|s| !s.labels.contains_key("run_id")),
            "no series is labelled by run"
        );
    };
    let all = scrape(&client, &server.url("/metrics"), &operator).await;
    check(&all, "after the workload");
    // One sample per step run, by tenant and step: each order ran order.ship once.
    for (tenant, n) in [("acme", 3.0), ("globex", 1.0)] {
        let ship = [("tenant", tenant), ("step", "order.ship")];
        assert_eq!(
            value(&all, "durable_step_duration_seconds_count", &ship),
            Some(n),
            "{tenant}"
        );
        assert_eq!(
            value(&all, "durable_step_queue_seconds_count", &ship),
            Some(n),
            "{tenant}"
        );
        assert!(
            value(
                &all,
                "durable_step_duration_seconds_bucket",
                &[("tenant", tenant), ("step", "order.ship"), ("le", "+Inf")]
            ) == Some(n),
            "a histogram with buckets"
        );
    }
    let turns = value(
        &all,
        "durable_turn_seconds_count",
        &[("tenant", "acme"), ("workflow", "demo.order")],
    )
    .expect("turn latencies");
    assert!(turns >= 3.0, "each order turned at least once: {turns}");
    assert!(
        all.iter().any(|s| s.name == "durable_commit_seconds_count"),
        "commit latencies"
    );
    assert!(
        all.iter()
            .any(|s| s.name == "durable_commit_batch_size_count"),
        "group-commit batch sizes"
    );

    // The store keeps the run counts: a restarted server reads the same.
    server.terminate();
    server.restart(&dir).await;
    let all = scrape(&client, &server.url("/metrics"), &operator).await;
    check(&all, "after a restart");
    assert_eq!(
        value(
            &all,
            "durable_step_duration_seconds_count",
            &[("tenant", "acme"), ("step", "order.ship")]
        ),
        None,
        "latencies are this process's own"
    );
}
