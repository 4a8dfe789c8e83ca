//! Events and signal-with-start through the API, on SQLite and on PostgreSQL: an event reaches
//! only its own tenant's waiting `demo.parcel` with its key, once per id; `order.placed` starts
//! one `demo.order` per event id; `POST /runs` with a `signal` starts a run once and signals
//! it; bad bodies are 400s that change nothing.

mod common;

use common::{Server, get_json, start_run, tempdir, wait_status};
use durable::store::postgres_testing;
use reqwest::StatusCode;
use serde_json::{Value, json};

async fn post(server: &Server, token: &str, path: &str, body: Value) -> (StatusCode, Value) {
    let answer = reqwest::Client::new()
        .post(server.url(path))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .expect("POST");
    let status = answer.status();
    (status, answer.json().await.unwrap_or(Value::Null))
}

/// Polls until run `id` waits for something.
async fn wait_waiting(server: &Server, token: &str, id: &str) {
    let client = reqwest::Client::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let detail = get_json(&client, server, token, &format!("/api/v1/runs/{id}")).await;
        if detail["run"]["status"] == "suspended" {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never waited: {detail}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
}

async fn events_reach_their_tenant_and_start_triggers(server: Server) {
    let client = reqwest::Client::new();
    let (acme, globex) = (server.token("acme"), server.token("globex"));
    let parcel = json!({"workflow": "demo.parcel", "input": {"order": "o-1"}});
    let ours = start_run(&client, &server, &acme, parcel.clone()).await;
    let theirs = start_run(&client, &server, &globex, parcel).await;
    let (ours, theirs) = (
        ours["id"].as_str().expect("id"),
        theirs["id"].as_str().expect("id"),
    );
    wait_waiting(&server, &acme, ours).await;
    wait_waiting(&server, &globex, theirs).await;

    let delivered =
        json!({"name": "parcel.delivered", "key": "o-1", "payload": {"at": "door"}, "id": "e-1"});
    let (status, outcome) = post(&server, &acme, "/api/v1/events", delivered.clone()).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{outcome}");
    assert_eq!(outcome, json!({"delivered": 1, "started": []}));
    let (status, again) = post(&server, &acme, "/api/v1/events", delivered).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert_eq!(
        again, outcome,
        "published again under its id: what it did the first time"
    );
    let done = wait_status(&client, &server, &acme, ours, "completed").await;
    assert_eq!(
        done["run"]["output"],
        json!({"order": "o-1", "delivered": {"at": "door"}})
    );
    let detail = get_json(&client, &server, &globex, &format!("/api/v1/runs/{theirs}")).await;
    assert_eq!(
        detail["run"]["status"], "suspended",
        "another tenant's run was reached"
    );

    // A trigger: one run per event id, in the publishing tenant.
    let placed =
        json!({"name": "order.placed", "payload": {"item": "lamp", "delay_ms": 0}, "id": "p-1"});
    let (status, first) = post(&server, &acme, "/api/v1/events", placed.clone()).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{first}");
    let (_, second) = post(&server, &acme, "/api/v1/events", placed).await;
    assert_eq!(first["started"], second["started"]);
    let started = first["started"][0].as_str().expect("a run started");
    let run = wait_status(&client, &server, &acme, started, "completed").await;
    assert_eq!(run["run"]["workflow"], "demo.order");
    assert_eq!(run["run"]["search_attributes"]["event_id"], "p-1", "{run}");
    let hidden = get_json(
        &client,
        &server,
        &globex,
        &format!("/api/v1/runs/{started}"),
    )
    .await;
    assert_eq!(hidden["error"]["code"], "not-found", "{hidden}");

    // Bad events change nothing.
    for bad in [
        json!({"payload": 1}),
        json!({"name": "", "payload": 1}),
        json!({"name": "x", "id": "a b"}),
        json!({"name": "x", "tenant": "globex"}),
    ] {
        let (status, answer) = post(&server, &acme, "/api/v1/events", bad.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {answer}");
    }
}

async fn signal_with_start_starts_once(server: Server) {
    let client = reqwest::Client::new();
    let acme = server.token("acme");
    let approve = json!({"name": "approve", "payload": {"by": "ann"}});
    let body = json!({"workflow": "demo.approval", "id": "approval-ann", "signal": approve});
    let (status, run) = post(&server, &acme, "/api/v1/runs", body.clone()).await;
    assert_eq!(status, StatusCode::CREATED, "{run}");
    let done = wait_status(&client, &server, &acme, "approval-ann", "completed").await;
    assert_eq!(done["run"]["output"], json!({"approved": {"by": "ann"}}));
    let (status, ended) = post(&server, &acme, "/api/v1/runs", body).await;
    assert_eq!(status, StatusCode::CONFLICT, "{ended}");

    // A run that exists is only signalled: `200`.
    start_run(
        &client,
        &server,
        &acme,
        json!({"workflow": "demo.approval", "id": "approval-bob"}),
    )
    .await;
    let body = json!({"workflow": "demo.approval", "id": "approval-bob", "signal": approve});
    let (status, run) = post(&server, &acme, "/api/v1/runs", body).await;
    assert_eq!(status, StatusCode::OK, "{run}");
    wait_status(&client, &server, &acme, "approval-bob", "completed").await;
    let no_id = json!({"workflow": "demo.approval", "signal": approve});
    let (status, answer) = post(&server, &acme, "/api/v1/runs", no_id).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_on_sqlite() {
    let server = Server::start(&tempdir(), &[]).await;
    events_reach_their_tenant_and_start_triggers(server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_on_postgres() {
    let Some(url) = postgres_testing::fresh_database().await else {
        return;
    };
    let server = Server::start(&tempdir(), &[("DATABASE_URL", url)]).await;
    events_reach_their_tenant_and_start_triggers(server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signal_with_start_on_sqlite() {
    let server = Server::start(&tempdir(), &[]).await;
    signal_with_start_starts_once(server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signal_with_start_on_postgres() {
    let Some(url) = postgres_testing::fresh_database().await else {
        return;
    };
    let server = Server::start(&tempdir(), &[("DATABASE_URL", url)]).await;
    signal_with_start_starts_once(server).await;
}
