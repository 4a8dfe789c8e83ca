//! Queries and updates through the API, on SQLite and on PostgreSQL: `demo.approval` answers
//! query `state` and takes update `approve` (refused with an empty `by`); an update's reply,
//! kept under its `Idempotency-Key`, is given again after the server restarts; another
//! tenant's token finds nothing; bad input is a 4xx that changes nothing.

mod common;

use std::path::Path;

use common::{Server, get_json, start_run, tempdir, wait_status};
use durable::store::postgres_testing;
use reqwest::StatusCode;
use serde_json::{Value, json};

/// `POST path` with `body` (raw) and the headers given; the status and the JSON answer.
async fn post(
    server: &Server,
    token: &str,
    path: &str,
    body: &str,
    headers: &[(&str, &str)],
) -> (StatusCode, Value) {
    let mut request = reqwest::Client::new()
        .post(server.url(path))
        .bearer_auth(token)
        .header("content-type", "application/json")
        .body(body.to_owned());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let answer = request.send().await.expect("POST");
    let status = answer.status();
    (status, answer.json().await.unwrap_or(Value::Null))
}

/// Polls until run `id` waits for its signal.
async fn wait_waiting(server: &Server, token: &str, id: &str) {
    let client = reqwest::Client::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let detail = get_json(&client, server, token, &format!("/api/v1/runs/{id}")).await;
        let waits = detail["checkpoints"].as_array().is_some_and(|cps| {
            cps.iter()
                .any(|cp| cp["kind"] == "signal" && cp["status"] == "pending")
        });
        if waits {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the run never waited: {detail}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
}

async fn approvals_answer_queries_and_updates(mut server: Server, dir: &Path) {
    let client = reqwest::Client::new();
    let token = server.token("acme");
    let globex = server.token("globex");
    let run = start_run(
        &client,
        &server,
        &token,
        json!({"workflow": "demo.approval", "input": {"request": "new laptop"}}),
    )
    .await;
    let id = run["id"].as_str().expect("id").to_owned();
    let base = format!("/api/v1/runs/{id}");
    wait_waiting(&server, &token, &id).await;

    let (status, state) = post(&server, &token, &format!("{base}/query/state"), "", &[]).await;
    assert_eq!(status, StatusCode::OK, "{state}");
    assert_eq!(
        state,
        json!({"result": {"status": "waiting", "request": "new laptop"}})
    );
    let (status, missing) = post(&server, &token, &format!("{base}/query/nope"), "", &[]).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{missing}");
    let message = missing["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("state"),
        "names what it registers: {message}"
    );
    let (status, _) = post(&server, &globex, &format!("{base}/query/state"), "", &[]).await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "another tenant's run is not there"
    );
    let (status, _) = post(&server, &token, "/api/v1/runs/a%20b/query/state", "", &[]).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    // A read-only token may ask a query (it changes nothing), not send an update.
    let reader = common::cli(
        &server.db_url,
        &["token", "issue", "--tenant", "acme", "--read-only"],
    );
    let reader = reader.trim();
    let (status, _) = post(&server, reader, &format!("{base}/query/state"), "", &[]).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = post(
        &server,
        reader,
        &format!("{base}/update/approve"),
        r#"{"by": "ro"}"#,
        &[],
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);

    // Refused updates and bad requests change nothing.
    let approve = format!("{base}/update/approve");
    let (status, refused) = post(&server, &token, &approve, r#"{"by": " "}"#, &[]).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("`by`"), "{message}");
    for (body, headers) in [
        ("{not json", &[][..]),
        (r#"{"by": 7}"#, &[][..]),
        (r#"{"by": "ann"}"#, &[("idempotency-key", "not a key")][..]),
    ] {
        let (status, answer) = post(&server, &token, &approve, body, headers).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {answer}");
    }
    let (status, _) = post(&server, &globex, &approve, r#"{"by": "mallory"}"#, &[]).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let detail = get_json(&client, &server, &token, &base).await;
    assert_eq!(detail["run"]["status"], "suspended", "{detail}");

    // Accepted: the reply comes back and the run takes the approval.
    let key = [("idempotency-key", "approve-ann-1")];
    let (status, reply) = post(&server, &token, &approve, r#"{"by": "ann"}"#, &key).await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    assert_eq!(reply, json!({"result": {"approved": true, "by": "ann"}}));
    let detail = wait_status(&client, &server, &token, &id, "completed").await;
    assert_eq!(detail["run"]["output"], json!({"approved": {"by": "ann"}}));

    // After a restart, the same key gives the same reply; a new update finds the run ended,
    // and the query still answers.
    server.terminate();
    server.restart(dir).await;
    let (status, again) = post(&server, &token, &approve, r#"{"by": "ann"}"#, &key).await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!(again, reply);
    let (status, late) = post(&server, &token, &approve, r#"{"by": "bob"}"#, &[]).await;
    assert_eq!(status, StatusCode::CONFLICT, "{late}");
    let (_, state) = post(&server, &token, &format!("{base}/query/state"), "null", &[]).await;
    assert_eq!(
        state,
        json!({"result": {"status": "approved", "approval": {"by": "ann"}}})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvals_answer_queries_and_updates_on_sqlite() {
    let dir = tempdir();
    let server = Server::start(&dir, &[]).await;
    approvals_answer_queries_and_updates(server, &dir).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvals_answer_queries_and_updates_on_postgres() {
    let Some(url) = postgres_testing::fresh_database().await else {
        return;
    };
    let dir = tempdir();
    let server = Server::start(&dir, &[("DATABASE_URL", url)]).await;
    approvals_answer_queries_and_updates(server, &dir).await;
}
