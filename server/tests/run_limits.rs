//! A run as a whole, through the API on SQLite and PostgreSQL: a start's `timeout` fails a run
//! that outlives it, and a failed `demo.flaky` starts its dead-letter `demo.alert`.

mod common;

use common::{Server, start_run, tempdir, wait_status};
use durable::store::postgres_testing;
use reqwest::StatusCode;
use serde_json::json;

async fn timeouts_and_dead_letters(server: Server) {
    let client = reqwest::Client::new();
    let acme = server.token("acme");
    let bad = client
        .post(server.url("/api/v1/runs"))
        .bearer_auth(&acme)
        .json(&json!({"workflow": "demo.approval", "timeout": "soon"}))
        .send()
        .await
        .expect("POST");
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
    let message = bad.text().await.unwrap_or_default();
    assert!(message.contains("30s"), "names the form: {message}");

    let run = start_run(
        &client,
        &server,
        &acme,
        json!({"workflow": "demo.approval", "timeout": "1s"}),
    )
    .await;
    assert!(run["deadline_at"].is_i64(), "{run}");
    let id = run["id"].as_str().expect("id");
    let failed = wait_status(&client, &server, &acme, id, "failed").await;
    assert_eq!(failed["run"]["error"]["code"], "run_timeout", "{failed}");

    let flaky = start_run(
        &client,
        &server,
        &acme,
        json!({"workflow": "demo.flaky", "input": {"ok": false}}),
    )
    .await;
    let id = flaky["id"].as_str().expect("id");
    let alert = format!("{id}.dead-letter");
    let done = wait_status(&client, &server, &acme, &alert, "completed").await;
    assert_eq!(done["run"]["workflow"], "demo.alert", "{done}");
    assert_eq!(done["run"]["output"]["alerted_about"], id);
    assert_eq!(done["run"]["search_attributes"]["dead_letter_of"], id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeouts_and_dead_letters_on_sqlite() {
    timeouts_and_dead_letters(Server::start(&tempdir(), &[]).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeouts_and_dead_letters_on_postgres() {
    let Some(url) = postgres_testing::fresh_database().await else {
        return;
    };
    timeouts_and_dead_letters(Server::start(&tempdir(), &[("DATABASE_URL", url)]).await).await;
}
