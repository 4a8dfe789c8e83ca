//! The JSON API against the real binary: tenant isolation by token, bad input, live events.

mod common;

use std::time::Duration;

use common::{Server, get_json, start_run, tempdir, two_tenants, wait_status};
use futures::StreamExt;
use serde_json::{Value, json};

#[tokio::test]
async fn tokens_confine_reads_lists_and_events_to_their_tenant() {
    let (server, client, acme, globex) = two_tenants().await;

    // Listen to acme's events before anything happens.
    let sse = client
        .get(server.url("/api/v1/events"))
        .bearer_auth(&acme)
        .send()
        .await
        .expect("sse");
    assert_eq!(sse.status(), 200);
    let mut sse = sse.bytes_stream();

    let acme_run = start_run(
        &client,
        &server,
        &acme,
        json!({"workflow": "demo.order", "input": {"delay_ms": 10}}),
    )
    .await;
    let globex_run = start_run(
        &client,
        &server,
        &globex,
        json!({"workflow": "demo.order", "input": {"delay_ms": 10}}),
    )
    .await;
    assert_eq!(acme_run["namespace"], "acme");
    assert_eq!(globex_run["namespace"], "globex");
    let globex_id = globex_run["id"].as_str().unwrap();
    let acme_id = acme_run["id"].as_str().unwrap();

    // Reading the other tenant's run is indistinguishable from a missing one.
    let r = client
        .get(server.url(&format!("/api/v1/runs/{globex_id}")))
        .bearer_auth(&acme)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let r = client
        .get(server.url(&format!("/api/v1/runs/{acme_id}")))
        .bearer_auth(&acme)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);

    // Whatever the query says, an acme list holds only acme runs.
    for q in [
        "",
        "?namespace=globex",
        "?tenant=globex",
        "?namespace=",
        "?workflow=demo.order&namespace=globex&limit=200",
    ] {
        let page: Value = get_json(&client, &server, &acme, &format!("/api/v1/runs{q}")).await;
        let runs = page["runs"].as_array().unwrap();
        assert!(!runs.is_empty(), "{q}: acme sees its own run");
        assert!(
            runs.iter().all(|r| r["namespace"] == "acme"),
            "{q}: only acme runs, got {runs:?}"
        );
    }

    // A body claiming a namespace is refused, not honoured.
    let r = client
        .post(server.url("/api/v1/runs"))
        .bearer_auth(&acme)
        .json(&json!({"workflow": "demo.order", "input": {}, "namespace": "globex"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);

    // The acme stream carried acme's events (through completion) and nothing of globex.
    let mut seen_acme_completed = false;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let mut buf = String::new();
    while tokio::time::Instant::now() < deadline && !seen_acme_completed {
        let Ok(Some(chunk)) = tokio::time::timeout(Duration::from_secs(5), sse.next()).await else {
            break;
        };
        buf.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
        while let Some(end) = buf.find("\n\n") {
            let frame: String = buf.drain(..end + 2).collect();
            for data in frame.lines().filter_map(|l| l.strip_prefix("data:")) {
                let ev: Value = serde_json::from_str(data.trim()).unwrap();
                assert_eq!(ev["namespace"], "acme", "acme's stream carried {ev}");
                assert_ne!(ev["runId"], globex_id);
                if ev["runId"] == acme_id && ev["type"] == "run.completed" {
                    seen_acme_completed = true;
                }
            }
        }
    }
    assert!(
        seen_acme_completed,
        "acme's stream shows its run completing"
    );
}

#[tokio::test]
async fn bad_requests_get_clear_errors_and_change_nothing() {
    let dir = tempdir();
    let server = Server::start(&dir, &[]).await;
    let client = reqwest::Client::new();
    let acme = server.token("acme");
    let post = |body: &'static str, token: Option<String>| {
        let mut req = client
            .post(server.url("/api/v1/runs"))
            .header("content-type", "application/json")
            .body(body);
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        req.send()
    };
    for body in [
        "{\"workflow\": ",
        "[]",
        "{\"input\": {}}",
        "{\"workflow\": \"nope\", \"input\": {}}",
        "{\"workflow\": \"\"}",
    ] {
        let r = post(body, Some(acme.clone())).await.unwrap();
        assert_eq!(r.status(), 400, "{body}");
        let err: Value = r.json().await.unwrap();
        assert_eq!(err["error"]["code"], "bad-request");
        assert!(!err["error"]["message"].as_str().unwrap().is_empty());
    }
    // Missing, malformed and forged tokens: another secret for acme's token id, acme's secret
    // under another id, a wire-style token.
    let (id, secret) = acme
        .strip_prefix("dtk_")
        .and_then(|rest| rest.split_once('_'))
        .unwrap();
    let reversed: String = secret.chars().rev().collect();
    for token in [
        None,
        Some("garbage".to_owned()),
        Some(format!("dtk_{id}_{reversed}")),
        Some(format!("dtk_{}_{secret}", "0".repeat(16))),
        Some("acme.AAAA".to_owned()),
    ] {
        let r = post("{\"workflow\": \"demo.order\"}", token.clone())
            .await
            .unwrap();
        assert_eq!(r.status(), 401, "{token:?}");
    }
    for q in [
        "?limit=0",
        "?limit=1000",
        "?limit=x",
        "?status=done",
        "?cursor=nonsense",
    ] {
        let r = client
            .get(server.url(&format!("/api/v1/runs{q}")))
            .bearer_auth(&acme)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 400, "{q}");
    }
    let r = client
        .get(server.url("/api/v1/runs/..%2Fetc"))
        .bearer_auth(&acme)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    // Nothing was created by any of it.
    let page: Value = get_json(&client, &server, &acme, "/api/v1/runs").await;
    assert_eq!(page["runs"].as_array().unwrap().len(), 0);

    // A chosen id is an idempotency key: its second use is a conflict that names the fix, and
    // starts nothing.
    let keyed = "{\"workflow\": \"demo.order\", \"id\": \"order-77\"}";
    assert_eq!(post(keyed, Some(acme.clone())).await.unwrap().status(), 201);
    let r = post(keyed, Some(acme.clone())).await.unwrap();
    assert_eq!(r.status(), 409);
    let err: Value = r.json().await.unwrap();
    assert_eq!(err["error"]["code"], "conflict");
    assert_eq!(
        err["error"]["message"],
        "a run with id `order-77` already exists; pick another id or omit it"
    );
    let page: Value = get_json(&client, &server, &acme, "/api/v1/runs").await;
    assert_eq!(page["runs"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn sigterm_drains_and_exits_cleanly() {
    let dir = tempdir();
    let mut server = Server::start(&dir, &[]).await;
    let client = reqwest::Client::new();
    let acme = server.token("acme");
    let run = start_run(
        &client,
        &server,
        &acme,
        json!({"workflow": "demo.order", "input": {"delay_ms": 300}}),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(150)).await;
    let status = server.terminate();
    assert!(status.success(), "durable exits 0 on SIGTERM, got {status}");
    // Nothing is left leased: a restart finishes the run.
    server.restart(&dir).await;
    let id = run["id"].as_str().unwrap();
    let last = wait_status(&client, &server, &acme, id, "completed").await;
    assert_eq!(
        last["run"]["status"], "completed",
        "run did not complete after a graceful restart: {last}"
    );
}

#[tokio::test]
async fn signals_reach_only_the_tokens_own_runs() {
    let (server, client, acme, globex) = two_tenants().await;
    let run = start_run(
        &client,
        &server,
        &acme,
        json!({"workflow": "demo.approval", "input": {}}),
    )
    .await;
    let id = run["id"].as_str().unwrap();
    let signal = |token: &str, body: Value| {
        client
            .post(server.url(&format!("/api/v1/runs/{id}/signal")))
            .bearer_auth(token)
            .json(&body)
            .send()
    };
    // globex cannot signal acme's run: it is not found, and nothing is delivered.
    let r = signal(
        &globex,
        json!({"name": "approve", "payload": {"by": "mallory"}}),
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 404);
    for bad in [
        json!({"payload": 1}),
        json!({"name": ""}),
        json!({"name": "approve", "tenant": "globex"}),
    ] {
        assert_eq!(
            signal(&acme, bad.clone()).await.unwrap().status(),
            400,
            "{bad}"
        );
    }
    let r = signal(&acme, json!({"name": "approve", "payload": {"by": "ada"}}))
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let last = wait_status(&client, &server, &acme, id, "completed").await;
    assert_eq!(
        last["run"]["output"],
        json!({"approved": {"by": "ada"}}),
        "{last}"
    );
    // A finished run takes no more signals.
    let r = signal(&acme, json!({"name": "approve"})).await.unwrap();
    assert_eq!(r.status(), 409);
}

#[tokio::test]
async fn a_fanout_gathers_children_that_stay_in_the_tenant() {
    let (server, client, acme, globex) = two_tenants().await;
    let run = start_run(
        &client,
        &server,
        &acme,
        json!({"workflow": "demo.fanout", "input": {"n": 2}}),
    )
    .await;
    let id = run["id"].as_str().unwrap();
    let last = wait_status(&client, &server, &acme, id, "completed").await;
    assert_eq!(last["run"]["output"], json!({"children": 2}), "{last}");
    let page = get_json(&client, &server, &acme, "/api/v1/runs?workflow=demo.order").await;
    let children = page["runs"].as_array().unwrap();
    assert_eq!(children.len(), 2);
    assert!(
        children
            .iter()
            .all(|c| c["parent_run_id"] == id && c["namespace"] == "acme")
    );
    let theirs = get_json(&client, &server, &globex, "/api/v1/runs").await;
    assert!(
        theirs["runs"].as_array().unwrap().is_empty(),
        "globex sees none of acme's children"
    );
    let child_id = children[0]["id"].as_str().unwrap();
    let r = client
        .get(server.url(&format!("/api/v1/runs/{child_id}")))
        .bearer_auth(&globex)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
}

#[tokio::test]
async fn control_verbs_act_only_on_the_tokens_own_runs() {
    let (server, client, acme, globex) = two_tenants().await;
    let post = |path: String, token: &str, body: Value| {
        client
            .post(server.url(&path))
            .bearer_auth(token)
            .json(&body)
            .send()
    };
    let waiting = start_run(
        &client,
        &server,
        &acme,
        json!({"workflow": "demo.approval", "input": {}}),
    )
    .await;
    let flaky = start_run(
        &client,
        &server,
        &acme,
        json!({"workflow": "demo.flaky", "input": {"ok": false}}),
    )
    .await;
    let (w, f) = (
        waiting["id"].as_str().unwrap(),
        flaky["id"].as_str().unwrap(),
    );
    tokio::time::sleep(Duration::from_millis(300)).await;

    // globex can touch neither, by any verb.
    for verb in ["cancel", "retry"] {
        for id in [w, f] {
            assert_eq!(
                post(format!("/api/v1/runs/{id}/{verb}"), &globex, json!({}))
                    .await
                    .unwrap()
                    .status(),
                404,
                "{verb} {id}"
            );
        }
    }
    let r = post(
        format!("/api/v1/runs/{f}/retry-with-input"),
        &globex,
        json!({"input": {"ok": true}}),
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 404);

    // acme cancels its waiting run; cancelling again conflicts.
    let r = post(format!("/api/v1/runs/{w}/cancel"), &acme, json!({}))
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.json::<Value>().await.unwrap()["status"], "cancelled");
    assert_eq!(
        post(format!("/api/v1/runs/{w}/cancel"), &acme, json!({}))
            .await
            .unwrap()
            .status(),
        409
    );

    // acme fixes its failed run with edited input: a new run, linked back, in acme.
    assert_eq!(
        post(
            format!("/api/v1/runs/{f}/retry-with-input"),
            &acme,
            json!({"wrong": 1})
        )
        .await
        .unwrap()
        .status(),
        400
    );
    let r = post(
        format!("/api/v1/runs/{f}/retry-with-input"),
        &acme,
        json!({"input": {"ok": true}}),
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 201);
    let new: Value = r.json().await.unwrap();
    assert_eq!(new["retry_of"], f);
    assert_eq!(new["namespace"], "acme");
    let new_id = new["id"].as_str().unwrap();
    let last = wait_status(&client, &server, &acme, new_id, "completed").await;
    assert_eq!(last["run"]["status"], "completed", "{last}");
    let original = get_json(&client, &server, &acme, &format!("/api/v1/runs/{f}")).await;
    assert_eq!(
        original["run"]["status"], "failed",
        "the original is untouched"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_filter_by_tag_attribute_and_time_within_the_tokens_tenant() {
    let (server, client, acme, globex) = two_tenants().await;
    let start = |token: &String, tags: Value, attrs: Value| {
        let body = json!({"workflow": "demo.approval", "input": {}, "tags": tags, "searchAttributes": attrs});
        let (client, server, token) = (client.clone(), &server, token.clone());
        async move { start_run(&client, server, &token, body).await }
    };
    let vip = start(&acme, json!(["vip"]), json!({"region": "eu", "tier": 2})).await;
    start(&acme, json!(["basic"]), json!({"region": "us", "tier": 1})).await;
    start(&globex, json!(["vip"]), json!({"region": "eu", "tier": 2})).await;
    let ids = |page: Value| -> Vec<String> {
        page["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let list = |q: &str| {
        let path = format!("/api/v1/runs?{q}");
        let (client, server, acme) = (&client, &server, &acme);
        async move { get_json(client, server, acme, &path).await }
    };
    let vip_id = vip["id"].as_str().unwrap().to_owned();
    assert_eq!(
        ids(list("tag=vip").await),
        [vip_id.as_str()],
        "globex's vip run stays hidden"
    );
    assert_eq!(ids(list("attr=region%3Deu").await), [vip_id.as_str()]);
    assert_eq!(ids(list("attr=tier%3D2&tag=vip").await), [vip_id.as_str()]);
    let created = vip["created_at"].as_i64().unwrap();
    assert!(ids(list(&format!("createdUntil={created}")).await).is_empty());
    assert!(ids(list(&format!("createdFrom={created}")).await).contains(&vip_id));
    let bad = client
        .get(server.url("/api/v1/runs?attr=region"))
        .bearer_auth(&acme)
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
    let err: Value = bad.json().await.unwrap();
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("key=value"),
        "{err}"
    );
}
