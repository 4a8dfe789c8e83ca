//! `/api/v1/pools` and `durable pool` against the real server, on SQLite and on PostgreSQL: the
//! contract's shapes, errors that name the fix, a read-only token that reads only, and another
//! tenant's token finding nothing of acme's.

mod common;

use common::{Server, cli, get_json, tempdir};
use durable::store::postgres_testing;
use reqwest::StatusCode;
use serde_json::{Value, json};

async fn answer(request: reqwest::RequestBuilder) -> (StatusCode, Value) {
    let response = request.send().await.expect("send");
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn the_pools_api_keeps_its_contract(server: &Server) {
    let client = reqwest::Client::new();
    let (acme, globex) = (server.token("acme"), server.token("globex"));
    let reader = cli(
        &server.db_url,
        &["token", "issue", "--tenant", "acme", "--read-only"],
    )
    .trim()
    .to_owned();
    let put = |name: &str, token: &str, body: Value| {
        client
            .put(server.url(&format!("/api/v1/pools/{name}")))
            .bearer_auth(token)
            .json(&body)
    };

    // Created: 201, with the partition its workers serve; changed: 200, created_at kept.
    let (status, gpu) = answer(put("gpu", &acme, json!({"labels": {"region": "eu"}}))).await;
    assert_eq!(status, StatusCode::CREATED, "{gpu}");
    assert_eq!(gpu["name"], "gpu");
    assert_eq!(gpu["tenant"], "acme");
    assert_eq!(gpu["partition"], "acme.gpu");
    assert_eq!(gpu["labels"], json!({"region": "eu"}));
    assert_eq!(gpu["workers"], json!([]));
    let (status, changed) = answer(put("gpu", &acme, json!({"labels": {"region": "us"}}))).await;
    assert_eq!(status, StatusCode::OK, "{changed}");
    assert_eq!(changed["labels"], json!({"region": "us"}));
    assert_eq!(changed["created_at"], gpu["created_at"]);

    // Bad input: 400 naming the fix; nothing created.
    for (name, body, names) in [
        ("GPU", json!({}), "pool name"),
        ("cpu", json!({"labels": {"bad key": "x"}}), "label key"),
        (
            "cpu",
            json!({"labels": {}, "tenant": "globex"}),
            "unknown field",
        ),
        ("cpu", json!({"labels": "eu"}), "invalid JSON"),
    ] {
        let (status, err) = answer(put(name, &acme, body.clone())).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{name} {body}: {err}");
        assert!(err.to_string().contains(names), "{name} {body}: {err}");
    }

    // A read-only token lists and reads, but does not edit.
    let listed = get_json(&client, server, &reader, "/api/v1/pools").await;
    let names: Vec<&str> = listed["pools"]
        .as_array()
        .expect("pools")
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert_eq!(names, ["gpu"]);
    let (status, _) = answer(put("cpu", &reader, json!({}))).await;
    assert_eq!(status, StatusCode::FORBIDDEN);

    // Another tenant sees none of acme's pools, and a pool of its own of the same name is its
    // own; deleting it leaves acme's.
    let theirs = get_json(&client, server, &globex, "/api/v1/pools").await;
    assert_eq!(theirs["pools"], json!([]));
    let (status, _) = answer(
        client
            .get(server.url("/api/v1/pools/gpu"))
            .bearer_auth(&globex),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, own) = answer(put("gpu", &globex, json!({}))).await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(own["partition"], "globex.gpu");
    let delete = |token: &str| {
        client
            .delete(server.url("/api/v1/pools/gpu"))
            .bearer_auth(token)
    };
    assert_eq!(answer(delete(&globex)).await.0, StatusCode::NO_CONTENT);
    assert_eq!(answer(delete(&globex)).await.0, StatusCode::NOT_FOUND);
    let shown = get_json(&client, server, &acme, "/api/v1/pools/gpu").await;
    assert_eq!(shown["labels"], json!({"region": "us"}));

    // Routing rules: one list per tenant, replaced whole. A rule naming a pool the tenant does
    // not have (another tenant's included) is refused, and so is a list without a catch-all.
    let routing = |token: &str, rules: Value| {
        client
            .put(server.url("/api/v1/routing"))
            .bearer_auth(token)
            .json(&json!({ "rules": rules }))
    };
    let (status, _) = answer(put("eu", &globex, json!({}))).await;
    assert_eq!(status, StatusCode::CREATED);
    for (rules, names) in [
        (
            json!([{"match": {}, "pool": "eu"}]),
            "not one of the tenant's",
        ),
        (
            json!([{"match": {"step": "x"}, "pool": "gpu"}]),
            "must match everything",
        ),
        (
            json!([{"match": {"when": 1}, "pool": "gpu"}]),
            "unknown field",
        ),
    ] {
        let (status, err) = answer(routing(&acme, rules.clone())).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{rules}: {err}");
        assert!(err.to_string().contains(names), "{rules}: {err}");
    }
    let rules = json!([
        {"match": {"workflow": "demo.order", "step": "order.charge"}, "pool": "gpu"},
        {"match": {}, "pool": "default"},
    ]);
    let (status, saved) = answer(routing(&acme, rules.clone())).await;
    assert_eq!(status, StatusCode::OK, "{saved}");
    assert_eq!(saved["rules"], rules);
    let shown = get_json(&client, server, &acme, "/api/v1/routing").await;
    assert_eq!(shown["rules"], rules);
    assert_eq!(shown["version"], saved["version"]);
    assert_eq!(
        get_json(&client, server, &globex, "/api/v1/routing").await["rules"],
        json!([])
    );
    assert_eq!(
        answer(routing(&reader, rules)).await.0,
        StatusCode::FORBIDDEN
    );
    let (status, err) = answer(
        client
            .delete(server.url("/api/v1/pools/gpu"))
            .bearer_auth(&acme),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{err}");
    assert!(err.to_string().contains("routing rule 1"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pools_api_keeps_its_contract_on_sqlite() {
    let server = Server::start(&tempdir(), &[]).await;
    the_pools_api_keeps_its_contract(&server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pools_api_keeps_its_contract_on_postgres() {
    let Some(url) = postgres_testing::fresh_database().await else {
        return;
    };
    let server = Server::start(&tempdir(), &[("DATABASE_URL", url)]).await;
    the_pools_api_keeps_its_contract(&server).await;
}

/// `durable pool` puts, lists and deletes a tenant's pools; a tenant's plan bounds how many it
/// holds (`durable tenant plan set --max-pools`), and the refusal names the limit. `durable
/// route` sets and shows its rules, and a pool a rule names cannot be deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_manages_a_tenants_pools_within_its_plan() {
    let dir = tempdir();
    let db = format!("sqlite://{}/durable.db", dir.display());
    cli(&db, &["migrate"]);
    let put = cli(
        &db,
        &[
            "pool",
            "put",
            "--tenant",
            "acme",
            "gpu",
            "--label",
            "region=eu",
        ],
    );
    assert!(
        put.contains("partition `acme.gpu`") && put.contains("--pool gpu"),
        "{put}"
    );
    cli(&db, &["tenant", "plan", "set", "acme", "--max-pools", "1"]);
    let refused = common::refused(
        &["pool", "put", "--tenant", "acme", "cpu"],
        &[("DATABASE_URL", &db)],
    );
    assert!(refused.contains("max_pools"), "{refused}");
    cli(
        &db,
        &[
            "pool",
            "put",
            "--tenant",
            "acme",
            "gpu",
            "--label",
            "region=us",
        ],
    );
    let listed: Value =
        serde_json::from_str(&cli(&db, &["pool", "list", "--tenant", "acme"])).expect("json");
    assert_eq!(listed[0]["name"], "gpu");
    assert_eq!(listed[0]["labels"], json!({"region": "us"}));
    let bad = common::refused(
        &["pool", "put", "--tenant", "acme", "x", "--label", "nope"],
        &[("DATABASE_URL", &db)],
    );
    assert!(bad.contains("KEY=VALUE"), "{bad}");
    let rules = dir.join("rules.json");
    std::fs::write(
        &rules,
        r#"{"rules": [{"match": {"step": "order.charge"}, "pool": "gpu"}, {"match": {}, "pool": "default"}]}"#,
    )
    .expect("write");
    let saved = cli(
        &db,
        &[
            "route",
            "set",
            "--tenant",
            "acme",
            rules.to_str().expect("utf8"),
        ],
    );
    assert!(saved.contains("2 rules saved"), "{saved}");
    let shown: Value =
        serde_json::from_str(&cli(&db, &["route", "show", "--tenant", "acme"])).expect("json");
    assert_eq!(shown["rules"][0]["pool"], "gpu");
    let in_use = common::refused(
        &["pool", "delete", "--tenant", "acme", "gpu"],
        &[("DATABASE_URL", &db)],
    );
    assert!(in_use.contains("routing rule 1"), "{in_use}");
    std::fs::write(&rules, r#"{"rules": [{"match": {}, "pool": "default"}]}"#).expect("write");
    cli(
        &db,
        &[
            "route",
            "set",
            "--tenant",
            "acme",
            rules.to_str().expect("utf8"),
        ],
    );
    cli(&db, &["pool", "delete", "--tenant", "acme", "gpu"]);
    let gone = common::refused(
        &["pool", "delete", "--tenant", "acme", "gpu"],
        &[("DATABASE_URL", &db)],
    );
    assert!(gone.contains("no pool `gpu`"), "{gone}");
}

/// `/api/v1/shared-pools`: the operator makes a shared pool and grants it to acme; acme lists
/// it among its pools, marked shared, and routes to it, which globex (not granted) cannot; acme
/// cannot make a pool of its own by that name; the grant cannot be taken back while a rule of
/// acme's names the pool, nor the pool deleted while granted. A tenant token reaches none of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_shares_a_pool_with_the_tenants_it_grants() {
    let server = Server::start(&tempdir(), &[]).await;
    let client = reqwest::Client::new();
    let (operator, acme, globex) = (
        server.operator_token(),
        server.token("acme"),
        server.token("globex"),
    );
    let call = |method: reqwest::Method, path: &str, token: &str| {
        client.request(method, server.url(path)).bearer_auth(token)
    };
    use reqwest::Method;

    let (status, pool) = answer(
        call(Method::PUT, "/api/v1/shared-pools/gpu", &operator)
            .json(&json!({"labels": {"gpu": "a100"}})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{pool}");
    assert_eq!(pool["grants"], json!([]));
    let (status, _) =
        answer(call(Method::PUT, "/api/v1/shared-pools/gpu", &acme).json(&json!({}))).await;
    assert!(
        status == StatusCode::FORBIDDEN || status == StatusCode::UNAUTHORIZED,
        "{status}"
    );
    let (status, granted) = answer(call(
        Method::PUT,
        "/api/v1/shared-pools/gpu/grants/acme",
        &operator,
    ))
    .await;
    assert_eq!(status, StatusCode::OK, "{granted}");
    assert_eq!(granted["grants"], json!(["acme"]));
    let (status, err) = answer(call(
        Method::PUT,
        "/api/v1/shared-pools/tpu/grants/acme",
        &operator,
    ))
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{err}");
    assert!(err.to_string().contains("no shared pool `tpu`"), "{err}");

    // acme sees it among its pools, shared; globex does not.
    let listed = get_json(&client, &server, &acme, "/api/v1/pools").await;
    assert_eq!(listed["pools"][0]["name"], "gpu", "{listed}");
    assert_eq!(listed["pools"][0]["shared"], true);
    assert_eq!(listed["pools"][0]["partition"], "acme.gpu");
    assert_eq!(
        get_json(&client, &server, &globex, "/api/v1/pools").await["pools"],
        json!([])
    );
    let (status, err) =
        answer(call(Method::PUT, "/api/v1/pools/gpu", &acme).json(&json!({}))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{err}");
    assert!(err.to_string().contains("shared pool granted"), "{err}");

    // acme routes to it; globex cannot.
    let rules = json!({"rules": [
        {"match": {"step": "order.charge"}, "pool": "gpu"},
        {"match": {}, "pool": "default"},
    ]});
    let (status, saved) = answer(call(Method::PUT, "/api/v1/routing", &acme).json(&rules)).await;
    assert_eq!(status, StatusCode::OK, "{saved}");
    let (status, _) = answer(call(Method::PUT, "/api/v1/routing", &globex).json(&rules)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);

    // Taken back only once no rule names it; deleted only once no tenant holds it.
    let (status, err) = answer(call(
        Method::DELETE,
        "/api/v1/shared-pools/gpu/grants/acme",
        &operator,
    ))
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{err}");
    assert!(err.to_string().contains("routing rule 1"), "{err}");
    let (status, err) = answer(call(Method::DELETE, "/api/v1/shared-pools/gpu", &operator)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{err}");
    assert!(err.to_string().contains("granted to acme"), "{err}");
    let default_only = json!({"rules": [{"match": {}, "pool": "default"}]});
    answer(call(Method::PUT, "/api/v1/routing", &acme).json(&default_only)).await;
    let (status, _) = answer(call(
        Method::DELETE,
        "/api/v1/shared-pools/gpu/grants/acme",
        &operator,
    ))
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(
        get_json(&client, &server, &acme, "/api/v1/pools").await["pools"],
        json!([])
    );
    let (status, _) = answer(call(Method::DELETE, "/api/v1/shared-pools/gpu", &operator)).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
}

/// A pool shows its steps out: a run routed to it whose step is running counts on it, and
/// nowhere else.
async fn a_pool_counts_its_steps_out(server: &Server) {
    let client = reqwest::Client::new();
    let acme = server.token("acme");
    for (path, body) in [
        ("/api/v1/pools/gpu", json!({})),
        (
            "/api/v1/routing",
            json!({"rules": [
                {"match": {"workflow": "demo.order"}, "pool": "gpu"},
                {"match": {}, "pool": "default"},
            ]}),
        ),
    ] {
        let (status, said) =
            answer(client.put(server.url(path)).bearer_auth(&acme).json(&body)).await;
        assert!(status.is_success(), "{path}: {said}");
    }
    assert_eq!(
        get_json(&client, server, &acme, "/api/v1/pools/gpu").await["waiting"],
        0
    );
    common::start_run(
        &client,
        server,
        &acme,
        json!({"workflow": "demo.order", "input": {"delay_ms": 5000}}),
    )
    .await;
    let mut shown = Value::Null;
    for _ in 0..100 {
        shown = get_json(&client, server, &acme, "/api/v1/pools/gpu").await;
        if shown["waiting"] == 1 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(shown["waiting"], 1, "{shown}");
    let listed = get_json(&client, server, &server.token("globex"), "/api/v1/pools").await;
    assert_eq!(listed["pools"], json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_counts_its_steps_out_on_sqlite() {
    let server = Server::start(&tempdir(), &[]).await;
    a_pool_counts_its_steps_out(&server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_counts_its_steps_out_on_postgres() {
    let Some(url) = postgres_testing::fresh_database().await else {
        return;
    };
    let server = Server::start(&tempdir(), &[("DATABASE_URL", url)]).await;
    a_pool_counts_its_steps_out(&server).await;
}
