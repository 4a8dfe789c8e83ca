//! Sagas through the API, on SQLite and on PostgreSQL: `demo.order` with `fail_at: "ship"`
//! compensates (refund, then release), and a cancel with `{"compensate": true}` undoes what a
//! running order did; a bad cancel body is a 400 that changes nothing.

mod common;

use common::{Server, get_json, start_run, tempdir, wait_status};
use durable::store::postgres_testing;
use reqwest::StatusCode;
use serde_json::{Value, json};

fn names(detail: &Value) -> Vec<String> {
    detail["checkpoints"]
        .as_array()
        .expect("checkpoints")
        .iter()
        .map(|cp| cp["name"].as_str().unwrap_or_default().to_owned())
        .collect()
}

fn undone(detail: &Value) -> Vec<(String, u64)> {
    detail["checkpoints"]
        .as_array()
        .expect("checkpoints")
        .iter()
        .filter_map(|cp| {
            let seq = cp["saga"]["undoes"].as_u64()?;
            Some((cp["name"].as_str()?.to_owned(), seq))
        })
        .collect()
}

async fn orders_compensate(server: &Server) {
    let client = reqwest::Client::new();
    let token = server.token("acme");

    let failing = start_run(
        &client,
        server,
        &token,
        json!({"workflow": "demo.order", "input": {"fail_at": "ship", "delay_ms": 0}}),
    )
    .await;
    let id = failing["id"].as_str().expect("id");
    let detail = wait_status(&client, server, &token, id, "compensated").await;
    assert_eq!(detail["run"]["status"], "compensated", "{detail}");
    assert_eq!(
        names(&detail),
        [
            "order.reserve",
            "order.charge",
            "order.ship",
            "order.refund",
            "order.release"
        ]
    );
    assert_eq!(
        undone(&detail),
        [
            ("order.refund".to_owned(), 1),
            ("order.release".to_owned(), 0)
        ]
    );

    // A running order, cancelled with compensation once it has charged.
    let running = start_run(
        &client,
        server,
        &token,
        json!({"workflow": "demo.order", "input": {"delay_ms": 1500}}),
    )
    .await;
    let id = running["id"].as_str().expect("id").to_owned();
    let path = format!("/api/v1/runs/{id}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !names(&get_json(&client, server, &token, &path).await).contains(&"order.ship".into()) {
        assert!(
            std::time::Instant::now() < deadline,
            "the order never reached ship"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let cancel = |body: &str| {
        client
            .post(server.url(&format!("{path}/cancel")))
            .bearer_auth(&token)
            .header("content-type", "application/json")
            .body(body.to_owned())
            .send()
    };
    let bad = cancel(r#"{"compensate": "yes"}"#).await.expect("send");
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
    let status_now = get_json(&client, server, &token, &path).await["run"]["status"].clone();
    assert_ne!(status_now, "cancelled", "a refused cancel changes nothing");
    let answer = cancel(r#"{"compensate": true}"#).await.expect("send");
    assert_eq!(answer.status(), StatusCode::OK, "{:?}", answer.text().await);
    let detail = wait_status(&client, server, &token, &id, "compensated").await;
    assert_eq!(detail["run"]["error"]["code"], "cancelled", "{detail}");
    assert_eq!(
        undone(&detail),
        [
            ("order.refund".to_owned(), 1),
            ("order.release".to_owned(), 0)
        ]
    );

    // Another tenant's token cannot cancel it, with compensation or without.
    let globex = server.token("globex");
    let theirs = client
        .post(server.url(&format!("{path}/cancel")))
        .bearer_auth(&globex)
        .json(&json!({"compensate": true}))
        .send()
        .await
        .expect("send");
    assert_eq!(theirs.status(), StatusCode::NOT_FOUND);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orders_compensate_on_sqlite() {
    let server = Server::start(&tempdir(), &[]).await;
    orders_compensate(&server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orders_compensate_on_postgres() {
    let Some(url) = postgres_testing::fresh_database().await else {
        return;
    };
    let server = Server::start(&tempdir(), &[("DATABASE_URL", url)]).await;
    orders_compensate(&server).await;
}
