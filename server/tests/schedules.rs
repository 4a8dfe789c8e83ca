//! `/api/v1/schedules` and `durable schedule` against the real server, on SQLite and on
//! PostgreSQL: the contract's shapes, errors that name the fix, a run per trigger carrying the
//! schedule's id, and another tenant's token finding nothing.

mod common;

use common::{Server, cli, get_json, tempdir, wait_status};
use durable::store::postgres_testing;
use reqwest::StatusCode;
use serde_json::{Value, json};

async fn answer(request: reqwest::RequestBuilder) -> (StatusCode, Value) {
    let response = request.send().await.expect("send");
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn the_schedules_api_keeps_its_contract(server: &Server) {
    let client = reqwest::Client::new();
    let (acme, globex) = (server.token("acme"), server.token("globex"));
    let post = |path: &str, token: &str, body: Value| {
        client.post(server.url(path)).bearer_auth(token).json(&body)
    };

    // A bad expression, zone, interval or policy: 400 naming what is wrong; nothing created.
    for (body, names) in [
        (
            json!({"id": "n", "workflow": "demo.order", "cron": "61 * * * *"}),
            "61 * * * *",
        ),
        (
            json!({"id": "n", "workflow": "demo.order", "cron": "* * *"}),
            "3 fields",
        ),
        (
            json!({"id": "n", "workflow": "demo.order", "cron": "0 * * * *", "timezone": "Moon/Base"}),
            "IANA",
        ),
        (
            json!({"id": "n", "workflow": "demo.order", "every": "5 parsecs"}),
            "not a duration",
        ),
        (
            json!({"id": "n", "workflow": "demo.order", "every": "1s", "cron": "* * * * *"}),
            "exactly one",
        ),
        (json!({"id": "n", "workflow": "demo.order"}), "exactly one"),
        (
            json!({"id": "n", "workflow": "demo.order", "every": "1m", "overlap": "sometimes"}),
            "overlap",
        ),
        (
            json!({"id": "n", "workflow": "no.such", "every": "1m"}),
            "no workflow",
        ),
        (
            json!({"id": "n", "workflow": "demo.order", "every": "1m", "jitter": "2m"}),
            "catch-up window",
        ),
        (
            json!({"id": "n", "workflow": "demo.order", "every": "1500ms"}),
            "whole seconds",
        ),
        (
            json!({"id": "a b", "workflow": "demo.order", "every": "1m"}),
            "schedule id",
        ),
        (
            json!({"id": "n", "workflow": "demo.order", "every": "1m", "tenant": "globex"}),
            "unknown field",
        ),
    ] {
        let (status, err) = answer(post("/api/v1/schedules", &acme, body.clone())).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {err}");
        assert!(err.to_string().contains(names), "{body}: {err}");
    }
    let listed = get_json(&client, server, &acme, "/api/v1/schedules").await;
    assert_eq!(listed["schedules"], json!([]));

    // Created: 201 with its next five fire times.
    let (status, created) = answer(post(
        "/api/v1/schedules",
        &acme,
        json!({"id": "nightly", "workflow": "demo.order", "input": {"order": 7},
               "cron": "0 30 2 * * *", "timezone": "Europe/Berlin", "overlap": "buffer_one"}),
    ))
    .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(created["id"], "nightly");
    assert_eq!(created["cron"], "0 30 2 * * *");
    assert_eq!(created["overlap"], "buffer_one");
    let next = created["next"].as_array().expect("next");
    assert_eq!(next.len(), 5);
    assert!(next.windows(2).all(|w| w[1].as_i64() > w[0].as_i64()));
    let (status, err) = answer(post(
        "/api/v1/schedules",
        &acme,
        json!({"id": "nightly", "workflow": "demo.order", "every": "1h"}),
    ))
    .await;
    assert_eq!(status, StatusCode::CONFLICT, "{err}");

    // Triggered: a run of the tenant, carrying the schedule's id.
    let (status, fired) = answer(post(
        "/api/v1/schedules/nightly/trigger",
        &acme,
        json!(null),
    ))
    .await;
    assert_eq!(status, StatusCode::OK, "{fired}");
    assert_eq!(fired["tick"]["outcome"], "started");
    let run_id = fired["tick"]["run_id"].as_str().expect("a run").to_owned();
    let run = wait_status(&client, server, &acme, &run_id, "completed").await;
    assert_eq!(
        run["run"]["search_attributes"]["schedule"], "nightly",
        "{run}"
    );
    let by_schedule = get_json(
        &client,
        server,
        &acme,
        "/api/v1/runs?attr=schedule%3Dnightly",
    )
    .await;
    assert_eq!(by_schedule["runs"].as_array().expect("runs").len(), 1);

    // Paused: no next fire times; resumed: back.
    let (status, paused) =
        answer(post("/api/v1/schedules/nightly/pause", &acme, json!(null))).await;
    assert_eq!(status, StatusCode::OK, "{paused}");
    assert_eq!(paused["paused"], true);
    assert_eq!(paused["next"], json!([]));
    let (_, resumed) = answer(post("/api/v1/schedules/nightly/resume", &acme, json!(null))).await;
    assert_eq!(resumed["paused"], false);
    assert_eq!(resumed["next"].as_array().expect("next").len(), 5);

    // Changed: a new cadence moves the next tick; a bad one changes nothing.
    let patch = |token: &str, body: Value| {
        client
            .patch(server.url("/api/v1/schedules/nightly"))
            .bearer_auth(token)
            .json(&body)
    };
    let (status, changed) = answer(patch(&acme, json!({"every": "15m"}))).await;
    assert_eq!(status, StatusCode::OK, "{changed}");
    assert_eq!(changed["every"], "15m");
    assert_eq!(changed["next"][0].as_i64().expect("a time") % 900_000, 0);
    let (status, _) = answer(patch(&acme, json!({"cron": "nope"}))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _) = answer(patch(&acme, json!({"id": "renamed"}))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let kept = get_json(&client, server, &acme, "/api/v1/schedules/nightly").await;
    assert_eq!(kept["every"], "15m");

    // Another tenant's token: nothing of acme's is found, changed, fired or deleted.
    let paths = ["/api/v1/schedules/nightly"];
    for path in paths {
        let (status, _) = answer(client.get(server.url(path)).bearer_auth(&globex)).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
    }
    assert_eq!(
        answer(patch(&globex, json!({"paused": true}))).await.0,
        StatusCode::NOT_FOUND
    );
    for verb in ["trigger", "pause", "resume"] {
        let path = format!("/api/v1/schedules/nightly/{verb}");
        assert_eq!(
            answer(post(&path, &globex, json!(null))).await.0,
            StatusCode::NOT_FOUND
        );
    }
    let delete = |token: &str| {
        client
            .delete(server.url("/api/v1/schedules/nightly"))
            .bearer_auth(token)
    };
    assert_eq!(answer(delete(&globex)).await.0, StatusCode::NOT_FOUND);
    let theirs = get_json(&client, server, &globex, "/api/v1/schedules").await;
    assert_eq!(theirs["schedules"], json!([]));
    let still = get_json(&client, server, &acme, "/api/v1/schedules/nightly").await;
    assert_eq!(still["paused"], false);

    assert_eq!(answer(delete(&acme)).await.0, StatusCode::NO_CONTENT);
    assert_eq!(answer(delete(&acme)).await.0, StatusCode::NOT_FOUND);
    let (status, _) = answer(
        client
            .get(server.url(&format!("/api/v1/runs/{run_id}")))
            .bearer_auth(&acme),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "a deleted schedule's runs stay");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_schedules_api_keeps_its_contract_on_sqlite() {
    let server = Server::start(&tempdir(), &[]).await;
    the_schedules_api_keeps_its_contract(&server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_schedules_api_keeps_its_contract_on_postgres() {
    let Some(url) = postgres_testing::fresh_database().await else {
        return;
    };
    let server = Server::start(&tempdir(), &[("DATABASE_URL", url)]).await;
    the_schedules_api_keeps_its_contract(&server).await;
}

/// `durable schedule` creates, shows, pauses, triggers, lists and deletes a tenant's
/// schedules on the database a server runs on, which fires them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_manages_a_tenants_schedules_and_the_server_fires_them() {
    let dir = tempdir();
    let server = Server::start(&dir, &[]).await;
    let client = reqwest::Client::new();
    let acme = server.token("acme");
    let run = |args: &[&str]| {
        let mut all = vec!["schedule", "--tenant", "acme"];
        all.extend_from_slice(args);
        cli(&server.db_url, &all)
    };
    let created: Value = serde_json::from_str(&run(&[
        "create",
        "pulse",
        "--workflow",
        "demo.order",
        "--every",
        "1s",
        "--input",
        r#"{"order":1}"#,
        "--overlap",
        "allow_all",
    ]))
    .expect("JSON");
    assert_eq!(created["every"], "1s");
    assert_eq!(created["next"].as_array().expect("next").len(), 5);

    // The server fires it within a couple of ticks, though another process created it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    loop {
        let runs = get_json(
            &client,
            &server,
            &acme,
            "/api/v1/runs?attr=schedule%3Dpulse",
        )
        .await;
        if runs["runs"].as_array().is_some_and(|r| r.len() >= 2) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the server never fired it: {runs}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }

    let paused: Value = serde_json::from_str(&run(&["pause", "pulse"])).expect("JSON");
    assert_eq!(paused["paused"], true);
    let tick: Value = serde_json::from_str(&run(&["trigger", "pulse"])).expect("JSON");
    assert!(tick["run_id"].is_string(), "{tick}");
    assert!(run(&["list"]).contains("pulse\tdemo.order\tevery 1s (UTC)\tpaused"));
    assert!(run(&["delete", "pulse"]).contains("deleted"));
    let refused = common::refused(
        &["schedule", "--tenant", "acme", "show", "pulse"],
        &[("DATABASE_URL", server.db_url.as_str())],
    );
    assert!(refused.contains("no schedule `pulse`"), "{refused}");
}
