//! Plans over the API and the CLI, against the real binary: the operator token reads and sets a
//! tenant's plan with its usage, a tenant token is refused there and reads its own, and a start
//! over a rate or queue ceiling answers 429 with the limit and Retry-After.

mod common;

use common::{Server, cli, refused, start_run, tempdir};
use serde_json::{Value, json};

async fn put_plan(
    client: &reqwest::Client,
    server: &Server,
    token: &str,
    tenant: &str,
    plan: Value,
) -> reqwest::Response {
    client
        .put(server.url(&format!("/api/v1/tenants/{tenant}/plan")))
        .bearer_auth(token)
        .json(&plan)
        .send()
        .await
        .expect("PUT")
}

/// `POST /api/v1/runs` of `demo.order` with `token`, whatever it answers.
async fn try_start(client: &reqwest::Client, server: &Server, token: &str) -> reqwest::Response {
    client
        .post(server.url("/api/v1/runs"))
        .bearer_auth(token)
        .json(&json!({ "workflow": "demo.order", "input": {} }))
        .send()
        .await
        .expect("POST")
}

#[tokio::test]
async fn operators_set_plans_tenants_read_their_own_and_starts_over_a_ceiling_get_429() {
    let dir = tempdir();
    let server = Server::start(&dir, &[]).await;
    let client = reqwest::Client::new();
    let operator = server.operator_token();
    let acme = server.token("acme");
    let globex = server.token("globex");

    // A tenant token may not touch plans, not even its own; garbage gets 401.
    let r = put_plan(
        &client,
        &server,
        &acme,
        "acme",
        json!({ "starts_per_minute": 1000 }),
    )
    .await;
    assert_eq!(r.status(), 403);
    let r = put_plan(&client, &server, "acme.forged", "acme", json!({})).await;
    assert_eq!(r.status(), 401);
    // The operator token reaches no tenant's runs.
    let r = client
        .get(server.url("/api/v1/runs"))
        .bearer_auth(&operator)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);

    // Bad plans are refused with the fix, and change nothing.
    for bad in [
        json!({ "weight": 0 }),
        json!({ "max_runs": 3 }),
        json!({ "starts_per_minute": -1 }),
    ] {
        let r = put_plan(&client, &server, &operator, "acme", bad.clone()).await;
        assert_eq!(r.status(), 400, "{bad}");
    }
    let r = put_plan(&client, &server, &operator, "not a tenant!", json!({})).await;
    assert_eq!(r.status(), 400);

    let r = put_plan(
        &client,
        &server,
        &operator,
        "acme",
        json!({ "starts_per_minute": 2, "max_concurrent_runs": null, "weight": 2 }),
    )
    .await;
    assert_eq!(r.status(), 200);
    let plan: Value = r.json().await.unwrap();
    assert_eq!(plan["starts_per_minute"], 2);
    assert_eq!(plan["weight"], 2);
    assert!(plan["max_concurrent_runs"].is_null());
    assert_eq!(plan["usage"]["running"], 0);

    // Two starts fit in the minute; the third is refused with the limit and when to retry.
    for _ in 0..2 {
        start_run(
            &client,
            &server,
            &acme,
            json!({ "workflow": "demo.order", "input": {} }),
        )
        .await;
    }
    let r = try_start(&client, &server, &acme).await;
    assert_eq!(r.status(), 429);
    let retry_after: u64 = r.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=30).contains(&retry_after), "{retry_after}");
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"], "quota-exceeded");
    assert_eq!(body["limit"], "starts_per_minute");
    assert_eq!(body["ceiling"], 2);
    // globex is not held by acme's plan.
    start_run(
        &client,
        &server,
        &globex,
        json!({ "workflow": "demo.order", "input": {} }),
    )
    .await;

    // The operator sees acme's usage; acme reads its own plan and usage, not globex's.
    let r = client
        .get(server.url("/api/v1/tenants/acme/plan"))
        .bearer_auth(&operator)
        .send()
        .await
        .unwrap();
    let plan: Value = r.json().await.unwrap();
    assert_eq!(plan["usage"]["started_last_minute"], 2);
    let own: Value = client
        .get(server.url("/api/v1/plan"))
        .bearer_auth(&acme)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(own["effective"]["starts_per_minute"], 2);
    assert_eq!(own["usage"]["started_last_minute"], 2);

    // A queue ceiling: with no run allowed to start, the queue fills and then refuses.
    let r = put_plan(
        &client,
        &server,
        &operator,
        "globex",
        json!({ "max_concurrent_runs": 0, "max_queued_runs": 1 }),
    )
    .await;
    assert_eq!(r.status(), 200);
    start_run(
        &client,
        &server,
        &globex,
        json!({ "workflow": "demo.order", "input": {} }),
    )
    .await;
    let r = try_start(&client, &server, &globex).await;
    assert_eq!(r.status(), 429);
    assert!(r.headers().contains_key("retry-after"));
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["limit"], "max_queued_runs");

    // The default plan, through the API and the CLI.
    let r = client
        .put(server.url("/api/v1/plans/default"))
        .bearer_auth(&operator)
        .json(&json!({ "max_payload_bytes": 100000 }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let shown = cli(&server.db_url, &["tenant", "plan", "show", "acme"]);
    let shown: Value = serde_json::from_str(&shown).unwrap();
    assert_eq!(shown["effective"]["max_payload_bytes"], 100000);
    assert_eq!(shown["plan"]["starts_per_minute"], 2);
    let set = cli(
        &server.db_url,
        &[
            "tenant",
            "plan",
            "set",
            "acme",
            "--starts-per-minute",
            "none",
            "--weight",
            "5",
        ],
    );
    let set: Value = serde_json::from_str(&set).unwrap();
    assert!(set["plan"]["starts_per_minute"].is_null());
    assert_eq!(set["plan"]["weight"], 5);

    // Bad values on the command line are refused with the fix, and change nothing.
    let db = server.db_url.as_str();
    let said = refused(
        &[
            "tenant",
            "plan",
            "set",
            "acme",
            "--max-concurrent-runs",
            "lots",
        ],
        &[("DATABASE_URL", db)],
    );
    assert!(said.contains("whole number"), "{said}");
    let said = refused(
        &["tenant", "plan", "set", "acme", "--weight", "0"],
        &[("DATABASE_URL", db)],
    );
    assert!(said.contains("weight"), "{said}");
    let said = refused(
        &["tenant", "plan", "set", "not a tenant!"],
        &[("DATABASE_URL", db)],
    );
    assert!(!said.is_empty());
    let unchanged: Value =
        serde_json::from_str(&cli(db, &["tenant", "plan", "show", "acme"])).unwrap();
    assert_eq!(unchanged["plan"]["weight"], 5);
    assert!(unchanged["plan"]["max_concurrent_runs"].is_null());
}
