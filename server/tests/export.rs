//! Exporting history against the real binary: a run's history (`GET /api/v1/runs/{id}/history`,
//! `durable run history`, the run page's download) reads back as the documented
//! `durable.run-history/1` shape, and `GET /api/v1/runs/export` streams every run a filter
//! matches as NDJSON across pages; another tenant's runs are neither exported nor found.

mod common;

use common::{Server, cli, session_cookie, start_run, tempdir, wait_status};
use durable::model::{CheckpointStatus, HISTORY_FORMAT, Run, RunHistory, RunStatus};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn histories_and_filtered_lists_export_in_their_documented_shapes() {
    let dir = tempdir();
    let server = Server::start(&dir, &[]).await;
    let client = reqwest::Client::new();
    let (acme, globex) = (server.token("acme"), server.token("globex"));
    let order = json!({"workflow": "demo.order", "input": {"delay_ms": 0}});
    let run = start_run(&client, &server, &acme, order.clone()).await;
    let id = run["id"].as_str().expect("id").to_owned();
    let last = wait_status(&client, &server, &acme, &id, "completed").await;
    assert_eq!(last["run"]["status"], "completed", "{last}");
    let theirs = start_run(&client, &server, &globex, order.clone()).await;
    let theirs = theirs["id"].as_str().expect("id").to_owned();

    // A run's history, read back as the documented shape.
    let answer = client
        .get(server.url(&format!("/api/v1/runs/{id}/history")))
        .bearer_auth(&acme)
        .send()
        .await
        .expect("GET history");
    assert_eq!(answer.status(), 200);
    let history: RunHistory = answer
        .json()
        .await
        .expect("a durable.run-history/1 document");
    assert_eq!(history.format, HISTORY_FORMAT);
    assert_eq!(history.run.id.as_str(), id);
    assert_eq!(history.run.status, RunStatus::Completed);
    let steps: Vec<(&str, CheckpointStatus)> = history
        .checkpoints
        .iter()
        .map(|c| (c.name.as_str(), c.status))
        .collect();
    assert_eq!(
        steps,
        [
            ("order.reserve", CheckpointStatus::Completed),
            ("order.charge", CheckpointStatus::Completed),
            ("order.ship", CheckpointStatus::Completed)
        ]
    );
    assert!(history.checkpoints.iter().all(|c| c.output.is_some()));
    let other = client
        .get(server.url(&format!("/api/v1/runs/{theirs}/history")))
        .bearer_auth(&acme)
        .send()
        .await
        .expect("GET");
    assert_eq!(other.status(), 404, "another tenant's run is not found");

    // The same document from the CLI.
    let printed = cli(&server.db_url, &["run", "--tenant", "acme", "history", &id]);
    let from_cli: RunHistory = serde_json::from_str(&printed).expect("the CLI's history");
    assert_eq!(from_cli.run, history.run);
    assert_eq!(from_cli.checkpoints, history.checkpoints);

    // And from the run page's download, for a logged-in user of the tenant only.
    let added = cli(
        &server.db_url,
        &[
            "user",
            "add",
            "--tenant",
            "acme",
            "--role",
            "viewer",
            "--email",
            "v@acme.test",
        ],
    );
    let password = added
        .lines()
        .find_map(|l| l.strip_prefix("password: "))
        .expect("a generated password");
    let cookie = session_cookie(&server, "v@acme.test", password).await;
    let download = |run: &str| {
        client
            .get(server.url(&format!("/runs/{run}/history.json")))
            .header(reqwest::header::COOKIE, &cookie)
            .send()
    };
    let answer = download(&id).await.expect("download");
    assert_eq!(answer.status(), 200);
    let disposition = answer.headers()["content-disposition"]
        .to_str()
        .expect("ascii")
        .to_owned();
    assert!(
        disposition.contains(&format!("{id}.history.json")),
        "{disposition}"
    );
    let downloaded: RunHistory = answer.json().await.expect("the download");
    assert_eq!(downloaded.run, history.run);
    assert_eq!(download(&theirs).await.expect("download").status(), 404);

    // A filtered list as NDJSON, across more than one page (200 runs a page).
    for _ in 0..210 {
        start_run(
            &client,
            &server,
            &acme,
            json!({"workflow": "demo.flaky", "input": {"ok": true}}),
        )
        .await;
    }
    let answer = client
        .get(server.url("/api/v1/runs/export?workflow=demo.flaky&namespace=globex"))
        .bearer_auth(&acme)
        .send()
        .await
        .expect("GET export");
    assert_eq!(answer.status(), 200);
    assert_eq!(answer.headers()["content-type"], "application/x-ndjson");
    let body = answer.text().await.expect("body");
    let runs: Vec<Run> = body
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect();
    assert_eq!(runs.len(), 210, "every matching run, once");
    let mut ids: Vec<&str> = runs.iter().map(|r| r.id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 210, "no run twice across pages");
    assert!(
        runs.iter()
            .all(|r| r.namespace.as_str() == "acme" && r.workflow == "demo.flaky"),
        "only the token's tenant's runs, whatever the query names"
    );
    let bad = client
        .get(server.url("/api/v1/runs/export?status=sleeping"))
        .bearer_auth(&acme)
        .send()
        .await
        .expect("GET export");
    assert_eq!(bad.status(), 400);
}
