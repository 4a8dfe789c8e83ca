//! `durable migrate` and `durable serve` with `DATABASE_URL=postgres://…`, end to end on a real
//! PostgreSQL (a database of its own), including a restart and the tenant line.

mod common;

use common::{Server, cli, get_json, start_run, tempdir, wait_status};
use durable::store::postgres_testing;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_and_serve_run_end_to_end_on_postgres() {
    let Some(url) = postgres_testing::fresh_database().await else {
        return;
    };
    let out = cli(&url, &["migrate"]);
    assert!(out.contains("migrations applied"), "{out}");
    assert!(
        cli(&url, &["migrate"]).contains("migrations applied"),
        "migrating twice is a no-op"
    );

    let dir = tempdir();
    let mut server = Server::start(&dir, &[("DATABASE_URL", url.clone())]).await;
    let client = reqwest::Client::new();
    let (acme, globex) = (server.token("acme"), server.token("globex"));
    let run = start_run(
        &client,
        &server,
        &acme,
        json!({"workflow": "demo.tour", "input": {"sleep_ms": 50, "delay_ms": 5}}),
    )
    .await;
    let id = run["id"].as_str().expect("id").to_owned();
    let done = wait_status(&client, &server, &acme, &id, "completed").await;
    assert_eq!(done["run"]["status"], "completed", "{done}");
    assert_eq!(done["run"]["namespace"], "acme");
    let kinds: Vec<_> = done["checkpoints"]
        .as_array()
        .expect("checkpoints")
        .iter()
        .map(|c| c["kind"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(kinds, ["remote_step", "sleep", "child", "remote_step"]);

    let other = client
        .get(server.url(&format!("/api/v1/runs/{id}")))
        .bearer_auth(&globex)
        .send()
        .await
        .expect("GET");
    assert_eq!(other.status(), 404, "globex must not see an acme run");

    // Nothing lives in the process: after a restart the run, the users' tokens and the
    // signing secret are all still there.
    server.kill();
    server.restart(&dir).await;
    let again = get_json(&client, &server, &acme, &format!("/api/v1/runs/{id}")).await;
    assert_eq!(again["run"]["status"], "completed");
    let waiting = start_run(
        &client,
        &server,
        &acme,
        json!({"workflow": "demo.approval", "input": {}}),
    )
    .await;
    let waiting = waiting["id"].as_str().expect("id").to_owned();
    wait_status(&client, &server, &acme, &waiting, "suspended").await;
    let sent = client
        .post(server.url(&format!("/api/v1/runs/{waiting}/signal")))
        .bearer_auth(&acme)
        .json(&json!({"name": "approve", "payload": {"by": "pg"}}))
        .send()
        .await
        .expect("POST");
    assert!(sent.status().is_success());
    let approved = wait_status(&client, &server, &acme, &waiting, "completed").await;
    assert_eq!(approved["run"]["output"], json!({"approved": {"by": "pg"}}));
}
