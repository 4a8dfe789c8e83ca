//! Hostile and careless input against the real server, on SQLite and on PostgreSQL: each answer
//! is a 4xx in the JSON error shape that names what to fix, and nothing is stored.

mod common;

use common::{Server, tempdir};
use durable::store::postgres_testing;
use reqwest::StatusCode;
use serde_json::{Value, json};

/// Sends `request` and returns its status and JSON body, insisting the body is JSON.
async fn answer(request: reqwest::RequestBuilder) -> (StatusCode, Value) {
    let response = request.send().await.expect("send");
    let status = response.status();
    let text = response.text().await.expect("body");
    let body = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("a {status} answer that is not JSON ({e}): {text}"));
    (status, body)
}

/// Posts to `path` the headers of a 3 MiB body and none of it, as a client that is refused
/// before it sent its body sees it (a client writing the whole body may see the connection
/// closed instead); the answer's status and JSON body.
async fn declared_too_large(
    server: &Server,
    path: &str,
    headers: &[(&str, &str)],
) -> (StatusCode, Value) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let address = server.base.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(address)
        .await
        .expect("connect");
    let mut request = format!(
        "POST {path} HTTP/1.1\r\nhost: {address}\r\ncontent-length: {}\r\nconnection: close\r\n",
        3 << 20
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    stream
        .write_all(request.as_bytes())
        .await
        .expect("send the headers");
    let mut raw = Vec::new();
    tokio::time::timeout(
        std::time::Duration::from_secs(10),
        stream.read_to_end(&mut raw),
    )
    .await
    .expect("an answer before the body")
    .expect("read the answer");
    let raw = String::from_utf8_lossy(&raw);
    let (head, body) = raw.split_once("\r\n\r\n").expect("an HTTP answer");
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse::<u16>().ok())
        .and_then(|code| StatusCode::from_u16(code).ok())
        .expect("a status line");
    let body = serde_json::from_str(body)
        .unwrap_or_else(|e| panic!("a {status} answer that is not JSON ({e}): {body}"));
    (status, body)
}

/// The error message of an API answer, in the one shape every API error has.
fn message(body: &Value) -> &str {
    body["error"]["message"]
        .as_str()
        .or_else(|| body["message"].as_str())
        .unwrap_or_else(|| panic!("no error message in {body}"))
}

async fn hostile_input_gets_4xx(server: &Server) {
    let client = reqwest::Client::new();
    let token = server.token("acme");
    let api = |path: &str| server.url(&format!("/api/v1{path}"));

    // List filters a store cannot hold: NUL in each, and one far too long.
    for query in [
        "workflow=a%00b",
        "tag=%00",
        "attr=region%3Deu%00",
        "status=running%00",
    ] {
        let (status, body) = answer(
            client
                .get(format!("{}?{query}", api("/runs")))
                .bearer_auth(&token),
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}: {body}");
        assert!(!message(&body).is_empty());
    }
    let long = "x".repeat(300);
    let (status, body) = answer(
        client
            .get(format!("{}?workflow={long}", api("/runs")))
            .bearer_auth(&token),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(message(&body).contains("max_name_chars"), "{body}");
    // A query that does not parse, in the same shape.
    let (status, body) = answer(
        client
            .get(format!("{}?createdFrom=yesterday", api("/runs")))
            .bearer_auth(&token),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");

    // 60,000 tags, a tag too long, too many attributes, a payload over the limit.
    let tags: Vec<String> = (0..60_000).map(|n| format!("t{n}")).collect();
    let (status, body) = answer(
        client
            .post(api("/runs"))
            .bearer_auth(&token)
            .json(&json!({ "workflow": "demo.order", "tags": tags })),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(message(&body).contains("max_tags"), "{body}");
    let (status, body) = answer(
        client
            .post(api("/runs"))
            .bearer_auth(&token)
            .json(&json!({ "workflow": "demo.order", "tags": ["x".repeat(129)] })),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(message(&body).contains("max_tag_chars"), "{body}");
    let attributes: serde_json::Map<String, Value> =
        (0..33).map(|n| (format!("a{n}"), json!(n))).collect();
    let (status, body) = answer(
        client
            .post(api("/runs"))
            .bearer_auth(&token)
            .json(&json!({ "workflow": "demo.order", "searchAttributes": attributes })),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(message(&body).contains("max_attributes"), "{body}");
    let (status, body) =
        answer(client.post(api("/runs")).bearer_auth(&token).json(
            &json!({ "workflow": "demo.order", "input": { "blob": "x".repeat(1_100_000) } }),
        ))
        .await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
    assert!(message(&body).contains("max_payload_bytes"), "{body}");
    // A body over what the server reads at all: refused on its declared length.
    let (status, body) = declared_too_large(
        server,
        "/api/v1/runs",
        &[
            ("authorization", &format!("Bearer {token}")),
            ("content-type", "application/json"),
        ],
    )
    .await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
    // A NUL in the input, a tag, a signal name.
    for start in [
        json!({ "workflow": "demo.order", "input": { "k": "a\u{0}" } }),
        json!({ "workflow": "demo.order", "tags": ["a\u{0}"] }),
        json!({ "workflow": "demo\u{0}" }),
    ] {
        let (status, body) =
            answer(client.post(api("/runs")).bearer_auth(&token).json(&start)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{start}: {body}");
    }
    // An API path that names nothing, and a method a route does not take.
    let (status, _) = answer(client.get(api("/nothing")).bearer_auth(&token)).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = answer(client.delete(api("/runs")).bearer_auth(&token)).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);

    // None of it was stored.
    let (status, page) = answer(client.get(api("/runs")).bearer_auth(&token)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(page["runs"].as_array().map(Vec::len), Some(0), "{page}");

    // The login server function: a NUL in the email, a missing field, a body of another
    // type, a body over the limit.
    let action = server.login_action().await;
    let login = server.url(&action);
    let (status, body) = answer(
        client
            .post(&login)
            .form(&[("email", "a\u{0}@acme.test"), ("password", "x")]),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let (status, body) = answer(client.post(&login).form(&[("email", "a@acme.test")])).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let (status, body) = answer(
        client
            .post(&login)
            .json(&json!({ "email": "a@acme.test", "password": "x" })),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let (status, body) = declared_too_large(
        server,
        &action,
        &[("content-type", "application/x-www-form-urlencoded")],
    )
    .await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_input_gets_4xx_on_sqlite() {
    let dir = tempdir();
    let server = Server::start(&dir, &[]).await;
    hostile_input_gets_4xx(&server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_input_gets_4xx_on_postgres() {
    let Some(url) = postgres_testing::fresh_database().await else {
        return;
    };
    let dir = tempdir();
    let server = Server::start(&dir, &[("DATABASE_URL", url)]).await;
    hostile_input_gets_4xx(&server).await;
}

/// The hostile JSON a property case posts, URL-encoded query pairs, and what came back.
mod properties {
    use super::*;
    use durable::testing::{hostile_json, hostile_string, wire_object};
    use proptest::prelude::*;
    use proptest::test_runner::{Config, FileFailurePersistence, TestRunner};

    const START: &[&str] = &["workflow", "input", "id", "tags", "searchAttributes"];
    const FILTERS: &[&str] = &[
        "status",
        "workflow",
        "tag",
        "attr",
        "createdFrom",
        "createdUntil",
        "id",
        "limit",
        "cursor",
        "namespace",
    ];

    /// A runner whose failures are kept in `tests/proptest-regressions/` (committed) and tried
    /// first on every later run.
    fn runner(cases: u32) -> TestRunner {
        TestRunner::new(Config {
            cases,
            failure_persistence: Some(Box::new(FileFailurePersistence::WithSource(
                "proptest-regressions",
            ))),
            source_file: Some(file!()),
            ..Config::default()
        })
    }

    /// An answer is a success or a 4xx in the JSON error shape: never a 5xx, never a body the
    /// client cannot read.
    fn judged(status: StatusCode, text: &str) -> Result<(), TestCaseError> {
        prop_assert!(!status.is_server_error(), "{status}: {text}");
        let body: Value = serde_json::from_str(text)
            .map_err(|e| TestCaseError::fail(format!("{status}, not JSON ({e}): {text}")))?;
        if status.is_client_error() {
            prop_assert!(!message(&body).is_empty(), "{body}");
        }
        Ok(())
    }

    /// Any start body, any list query and any signal, retry or cancel body against one
    /// server: each answer is judged as above, and a start refused stores no run.
    #[test]
    fn any_body_or_query_gets_a_success_or_a_4xx() {
        let runtime = tokio::runtime::Runtime::new().expect("runtime");
        let dir = tempdir();
        let server = runtime.block_on(Server::start(&dir, &[]));
        let token = server.token("acme");
        let client = reqwest::Client::new();
        let send = |request: reqwest::RequestBuilder| {
            runtime.block_on(async {
                let response = request.bearer_auth(&token).send().await.expect("send");
                let status = response.status();
                (status, response.text().await.expect("body"))
            })
        };

        // Starts of workflows the server has, every other field hostile, beside any body.
        let real = (
            prop::sample::select(vec!["demo.order", "demo.approval"]),
            wire_object(START),
        )
            .prop_map(|(workflow, mut body)| {
                body["workflow"] = json!(workflow);
                body
            });
        let starts = prop_oneof![real, wire_object(START), hostile_json()];
        runner(96)
            .run(&starts, |body| {
                let (status, text) = send(client.post(server.url("/api/v1/runs")).json(&body));
                judged(status, &text)?;
                if !status.is_success()
                    && let Some(id) = body.get("id").and_then(Value::as_str)
                    && durable::model::RunId::parse(id).is_ok()
                {
                    let (status, _) = send(client.get(server.url(&format!("/api/v1/runs/{id}"))));
                    prop_assert_eq!(
                        status,
                        StatusCode::NOT_FOUND,
                        "a refused start stored {}",
                        id
                    );
                }
                Ok(())
            })
            .unwrap_or_else(|e| panic!("{e}"));

        let queries =
            prop::collection::vec((prop::sample::select(FILTERS), hostile_string()), 0..5);
        runner(96)
            .run(&queries, |pairs| {
                let mut url = reqwest::Url::parse(&server.url("/api/v1/runs")).expect("url");
                url.query_pairs_mut().extend_pairs(pairs);
                let (status, text) = send(client.get(url));
                judged(status, &text)
            })
            .unwrap_or_else(|e| panic!("{e}"));

        let run = runtime.block_on(common::start_run(
            &client,
            &server,
            &token,
            json!({ "workflow": "demo.approval", "input": {} }),
        ));
        let id = run["id"].as_str().expect("id").to_owned();
        let bodies = (
            prop::sample::select(vec!["signal", "retry-with-input", "cancel"]),
            prop_oneof![wire_object(&["name", "payload", "input"]), hostile_json()],
        );
        runner(64)
            .run(&bodies, |(verb, body)| {
                let path = format!("/api/v1/runs/{id}/{verb}");
                let (status, text) = send(client.post(server.url(&path)).json(&body));
                judged(status, &text)
            })
            .unwrap_or_else(|e| panic!("{e}"));
    }
}
