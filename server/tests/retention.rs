//! Retention against the real binary: a plan's `retention_days` (the default plan's, or a
//! tenant's own over it), `durable prune --dry-run` saying what would go and changing nothing,
//! `durable prune` deleting exactly the expired runs of the tenants whose plans expire them,
//! and the dashboard's API answering 404 for a deleted run.

mod common;

use common::{Server, cli, get_json, start_run, tempdir, wait_status};
use serde_json::json;
use sqlx::Connection;

/// Moves `ids`' end two days back, as if they had finished then.
async fn age(db_url: &str, ids: &[&str]) {
    let mut conn = sqlx::SqliteConnection::connect(db_url)
        .await
        .expect("the server's database");
    for id in ids {
        sqlx::query("UPDATE runs SET finished_at = finished_at - 2 * 86400000 WHERE id = ?")
            .bind(*id)
            .execute(&mut conn)
            .await
            .expect("age a run");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prune_deletes_exactly_what_the_plans_expire_and_a_dry_run_nothing() {
    let dir = tempdir();
    let server = Server::start(&dir, &[]).await;
    let client = reqwest::Client::new();
    let (acme, globex) = (server.token("acme"), server.token("globex"));
    let said = cli(&server.db_url, &["prune", "--dry-run"]);
    assert!(said.contains("history is kept forever"), "{said}");

    let mut ids = Vec::new();
    for token in [&acme, &acme, &globex] {
        let run = start_run(
            &client,
            &server,
            token,
            json!({"workflow": "demo.order", "input": {"delay_ms": 0}}),
        )
        .await;
        let id = run["id"].as_str().expect("id").to_owned();
        let last = wait_status(&client, &server, token, &id, "completed").await;
        assert_eq!(last["run"]["status"], "completed", "{last}");
        ids.push(id);
    }
    // acme's first and globex's run ended two days ago; acme's second just now.
    age(&server.db_url, &[&ids[0], &ids[2]]).await;
    // Every tenant keeps a day, but globex keeps a week.
    cli(
        &server.db_url,
        &[
            "tenant",
            "plan",
            "set",
            "--default",
            "--retention-days",
            "1",
        ],
    );
    cli(
        &server.db_url,
        &["tenant", "plan", "set", "globex", "--retention-days", "7"],
    );
    let refused = std::process::Command::new(common::BIN)
        .args(["tenant", "plan", "set", "acme", "--retention-days", "0"])
        .env("DATABASE_URL", &server.db_url)
        .output()
        .expect("run durable");
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("`retention_days` must be between 1"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );

    let said = cli(&server.db_url, &["prune", "--dry-run"]);
    assert!(
        said.contains("acme: keeps 1 day; 1 runs would be deleted"),
        "{said}"
    );
    assert!(
        said.contains("globex: keeps 7 days; 0 runs would be deleted"),
        "{said}"
    );
    let run = get_json(&client, &server, &acme, &format!("/api/v1/runs/{}", ids[0])).await;
    assert_eq!(
        run["run"]["status"], "completed",
        "a dry run deletes nothing: {run}"
    );

    let said = cli(&server.db_url, &["prune"]);
    assert!(said.contains("acme: keeps 1 day; 1 runs deleted"), "{said}");
    let gone = client
        .get(server.url(&format!("/api/v1/runs/{}", ids[0])))
        .bearer_auth(&acme)
        .send()
        .await
        .expect("GET");
    assert_eq!(gone.status(), 404);
    for (token, id) in [(&acme, &ids[1]), (&globex, &ids[2])] {
        let kept = get_json(&client, &server, token, &format!("/api/v1/runs/{id}")).await;
        assert_eq!(kept["run"]["status"], "completed", "{id} is kept: {kept}");
    }
    let said = cli(&server.db_url, &["prune", "--dry-run", "--tenant", "acme"]);
    assert_eq!(said.trim(), "acme: keeps 1 day; 0 runs would be deleted");
}
