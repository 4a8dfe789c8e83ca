//! Logs: with `DURABLE_LOG_FORMAT=json` every log line is one JSON object, and every line logged
//! while a run's turns or steps execute carries the run's tenant and id (and its workflow, for
//! turns); a bad format is refused at start-up, naming the fix.

mod common;

use common::{STDERR_TO, Server, start_run, tempdir, wait_status};
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_name_each_runs_tenant_id_and_workflow() {
    let dir = tempdir();
    let log = dir.join("stderr.log");
    let mut server = Server::start(
        &dir,
        &[
            ("DURABLE_LOG_FORMAT", "json".to_owned()),
            ("RUST_LOG", "info,durable=debug".to_owned()),
            (STDERR_TO, log.display().to_string()),
        ],
    )
    .await;
    let client = reqwest::Client::new();
    let acme = server.token("acme");
    let run = start_run(
        &client,
        &server,
        &acme,
        json!({"workflow": "demo.order", "input": {"delay_ms": 0}}),
    )
    .await;
    let id = run["id"].as_str().expect("id").to_owned();
    wait_status(&client, &server, &acme, &id, "completed").await;
    server.terminate();

    let text = std::fs::read_to_string(&log).expect("the log");
    let lines: Vec<Value> = text
        .lines()
        // Log lines; a library's own `eprintln!` (Leptos' notes at start-up) is not one.
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    // The lines about this run: in its spans, or naming it in their fields.
    let about = |line: &Value| {
        let in_span = line["spans"]
            .as_array()
            .is_some_and(|spans| spans.iter().any(|s| s["run_id"] == json!(id)));
        in_span || line["fields"]["run_id"] == json!(id)
    };
    assert!(lines.len() > 3, "hardly any log lines: {text}");
    let ours: Vec<&Value> = lines.iter().filter(|l| about(l)).collect();
    assert!(
        ours.iter().any(|l| l["fields"]["status"] == "completed"),
        "no line says it completed: {ours:#?}"
    );
    assert!(
        ours.iter().any(|l| l["span"]["name"] == "run"),
        "no line from inside its turns: {ours:#?}"
    );
    for line in &ours {
        let named = |key: &str| {
            line["fields"][key].is_string()
                || line["spans"]
                    .as_array()
                    .is_some_and(|spans| spans.iter().any(|s| s[key].is_string()))
        };
        assert!(named("tenant"), "no tenant: {line}");
        let turn = line["span"]["name"] != "step";
        assert!(!turn || named("workflow"), "no workflow: {line}");
    }
}

#[test]
fn an_unknown_log_format_is_refused_with_the_fix() {
    let out = std::process::Command::new(common::BIN)
        .arg("migrate")
        .env("DURABLE_LOG_FORMAT", "yaml")
        .env("DATABASE_URL", common::db_url(&tempdir()))
        .output()
        .expect("run durable");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("`json` or `text`"), "{err}");
}
