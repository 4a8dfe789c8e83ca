//! API tokens against two real servers on one database: a read-only token reads and nothing
//! more, a revoked token is refused from its next request on by every process, an expired one
//! by itself, and the wire's HMAC tokens are not API tokens.

mod common;

use common::{Server, cli, tempdir};
use reqwest::StatusCode;
use serde_json::{Value, json};

async fn status_of(request: reqwest::RequestBuilder) -> (StatusCode, Value) {
    let response = request.send().await.expect("send");
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_token_is_refused_at_once_by_every_process() {
    let dir = tempdir();
    let first = Server::start(&dir, &[]).await;
    let second = Server::start(&dir, &[]).await;
    let client = reqwest::Client::new();
    let token = first.token("acme");
    let list = |server: &Server| client.get(server.url("/api/v1/runs")).bearer_auth(&token);
    for server in [&first, &second] {
        assert_eq!(status_of(list(server)).await.0, StatusCode::OK);
    }

    let id = &token["dtk_".len()..token.len() - 65];
    assert!(cli(&first.db_url, &["token", "revoke", id]).contains("revoked"));
    // No wait: the very next request on either process is refused.
    for server in [&first, &second] {
        let (status, body) = status_of(list(server)).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
        assert!(body.to_string().contains("revoked"), "{body}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scopes_expiry_and_wire_tokens_hold_on_the_api() {
    let dir = tempdir();
    let server = Server::start(&dir, &[]).await;
    let client = reqwest::Client::new();
    let issue = |args: &[&str]| {
        let mut all = vec!["token", "issue"];
        all.extend_from_slice(args);
        cli(&server.db_url, &all).trim().to_owned()
    };
    let start = |token: &str| {
        client
            .post(server.url("/api/v1/runs"))
            .bearer_auth(token)
            .json(&json!({ "workflow": "demo.order", "input": {} }))
    };

    let reader = issue(&["--tenant", "acme", "--read-only", "--name", "dashboards"]);
    let (status, _) = status_of(client.get(server.url("/api/v1/runs")).bearer_auth(&reader)).await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = status_of(start(&reader)).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert!(body.to_string().contains("read-only"), "{body}");

    let writer = issue(&["--tenant", "acme"]);
    assert_eq!(status_of(start(&writer)).await.0, StatusCode::CREATED);

    // An operator token reaches plans, not runs; a tenant token no plan but its own.
    let operator = issue(&["--operator"]);
    assert_eq!(status_of(start(&operator)).await.0, StatusCode::FORBIDDEN);
    let plan = |token: &str| {
        client
            .get(server.url("/api/v1/tenants/acme/plan"))
            .bearer_auth(token)
    };
    assert_eq!(status_of(plan(&operator)).await.0, StatusCode::OK);
    assert_eq!(status_of(plan(&writer)).await.0, StatusCode::FORBIDDEN);

    // The wire's token signs SDK messages; the API names the token to use instead.
    let wire = issue(&["--tenant", "acme", "--wire"]);
    let (status, body) = status_of(start(&wire)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert!(body.to_string().contains("durable token issue"), "{body}");

    let brief = issue(&["--tenant", "acme", "--expires-in", "1s"]);
    assert_eq!(status_of(start(&brief)).await.0, StatusCode::CREATED);
    tokio::time::sleep(std::time::Duration::from_millis(1_100)).await;
    let (status, body) = status_of(start(&brief)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert!(body.to_string().contains("expired"), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_lists_issues_and_revokes_tokens_over_the_api() {
    let dir = tempdir();
    let server = Server::start(&dir, &[]).await;
    let client = reqwest::Client::new();
    let operator = server.operator_token();
    let tenant_token = server.token("acme");
    let tokens_of = |tenant: &str| server.url(&format!("/api/v1/tenants/{tenant}/tokens"));

    let (status, issued) = status_of(
        client
            .post(tokens_of("acme"))
            .bearer_auth(&operator)
            .json(&json!({ "name": "billing", "scope": "read", "expires_in_seconds": 3600 })),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{issued}");
    assert_eq!(issued["scope"], "read");
    assert_eq!(issued["tenant"], "acme");
    let token = issued["token"]
        .as_str()
        .expect("the token, once")
        .to_owned();
    let id = issued["id"].as_str().expect("id").to_owned();
    let (status, _) = status_of(client.get(server.url("/api/v1/runs")).bearer_auth(&token)).await;
    assert_eq!(status, StatusCode::OK);

    let (status, listed) = status_of(client.get(tokens_of("acme")).bearer_auth(&operator)).await;
    assert_eq!(status, StatusCode::OK);
    let names: Vec<&str> = listed
        .as_array()
        .expect("a list")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(names, ["billing", "cli"], "{listed}");
    assert!(
        listed.to_string().find("dtk_").is_none(),
        "a listing holds no token: {listed}"
    );

    // A tenant's token reaches none of it, its own tenant's tokens included.
    for request in [
        client.get(tokens_of("acme")),
        client.post(tokens_of("acme")).json(&json!({ "name": "x" })),
        client.delete(server.url(&format!("/api/v1/tokens/{id}"))),
    ] {
        let (status, body) = status_of(request.bearer_auth(&tenant_token)).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    }
    // Bad requests are named.
    for body in [
        json!({ "name": "" }),
        json!({ "name": "x", "scope": "operator" }),
        json!({ "name": "x", "expires_in_seconds": 0 }),
        json!({ "name": "x", "tenant": "globex" }),
    ] {
        let (status, answer) = status_of(
            client
                .post(tokens_of("acme"))
                .bearer_auth(&operator)
                .json(&body),
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {answer}");
    }

    let revoke = || {
        client
            .delete(server.url(&format!("/api/v1/tokens/{id}")))
            .bearer_auth(&operator)
    };
    assert_eq!(status_of(revoke()).await.0, StatusCode::NO_CONTENT);
    assert_eq!(status_of(revoke()).await.0, StatusCode::NOT_FOUND);
    let (status, _) = status_of(client.get(server.url("/api/v1/runs")).bearer_auth(&token)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}
