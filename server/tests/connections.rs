//! Connections and the `durable.http` step against the real server: the API's contract on
//! SQLite and PostgreSQL (secrets write-only, another tenant's token finding nothing, the
//! plan's ceiling), a server without a master key, and a call through a connection to a
//! downstream server in this test, whose secret header reaches that server and nothing else:
//! not the database, the export, the logs, the traces, nor a host a redirect leads to. Every
//! SSRF probe is refused, a 5xx is retried and a 4xx is not.

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode as Status, Uri};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{any, post};
use common::{STDERR_TO, Server, cli, get_json, start_run, tempdir, wait_status};
use durable::store::postgres_testing;
use reqwest::StatusCode;
use serde_json::{Value, json};

/// A secret no other test writes, so finding it anywhere is this test's doing.
fn fresh_secret() -> String {
    format!(
        "sk_live_{:016x}{:016x}",
        rand::random::<u64>(),
        rand::random::<u64>()
    )
}

/// 64 hex characters: a master key.
fn master_key() -> String {
    (0..4)
        .map(|_| format!("{:016x}", rand::random::<u64>()))
        .collect()
}

async fn answer(request: reqwest::RequestBuilder) -> (StatusCode, Value) {
    let response = request.send().await.expect("send");
    let status = response.status();
    let text = response.text().await.unwrap_or_default();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

async fn the_connections_api_keeps_its_contract(server: &Server) {
    let client = reqwest::Client::new();
    let (acme, globex) = (server.token("acme"), server.token("globex"));
    let reader = cli(
        &server.db_url,
        &["token", "issue", "--tenant", "acme", "--read-only"],
    )
    .trim()
    .to_owned();
    let secret = fresh_secret();
    let put = |name: &str, token: &str, body: Value| {
        client
            .put(server.url(&format!("/api/v1/connections/{name}")))
            .bearer_auth(token)
            .json(&body)
    };
    let stripe = json!({
        "kind": "http",
        "base_url": "https://api.stripe.com/v1/",
        "headers": {"Accept": "application/json"},
        "secret_headers": {"Authorization": format!("Bearer {secret}")},
    });

    // Created: 201, the secret header listed as set, its value nowhere.
    let (status, created) = answer(put("stripe", &acme, stripe.clone())).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(created["kind"], "http");
    assert_eq!(created["base_url"], "https://api.stripe.com/v1/");
    assert_eq!(created["headers"], json!({"Accept": "application/json"}));
    assert_eq!(created["secrets"]["Authorization"]["set"], true);
    assert!(!created.to_string().contains(&secret));
    for path in ["/api/v1/connections/stripe", "/api/v1/connections"] {
        let read = get_json(&client, server, &reader, path).await;
        assert!(read.to_string().contains("Authorization"), "{read}");
        assert!(!read.to_string().contains(&secret), "{path}: {read}");
    }

    // Changed without naming the secret: 200, the secret kept, when it was set unchanged.
    let (status, changed) = answer(put(
        "stripe",
        &acme,
        json!({"kind": "http", "base_url": "https://api.stripe.com/v2/"}),
    ))
    .await;
    assert_eq!(status, StatusCode::OK, "{changed}");
    assert_eq!(changed["base_url"], "https://api.stripe.com/v2/");
    assert_eq!(changed["headers"], json!({}));
    assert_eq!(
        changed["secrets"]["Authorization"],
        created["secrets"]["Authorization"]
    );

    // Bad input: 400 naming the fix, quoting no value; nothing changed.
    let typo = fresh_secret();
    for (body, names) in [
        (
            json!({"kind": "secret", "values": {"k": "v"}}),
            "cannot become",
        ),
        (json!({"kind": "http", "base_url": "ftp://x/"}), "base_url"),
        (json!({"kind": "http"}), "needs a `base_url`"),
        (
            json!({"kind": "http", "base_url": "https://a/", "secret_headers": typo}),
            "expected a map",
        ),
        (
            json!({"kind": "http", "base_url": "https://a/", "secret_header": {}}),
            "unknown field",
        ),
        (
            json!({"kind": "http", "base_url": "https://a/", "headers": {"Host": "x"}}),
            "set by the HTTP client",
        ),
    ] {
        let (status, err) = answer(put("stripe", &acme, body.clone())).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {err}");
        assert!(err.to_string().contains(names), "{body}: {err}");
        assert!(!err.to_string().contains(&typo), "{err}");
    }
    let (status, _) = answer(put("Bad Name", &acme, stripe.clone())).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let shown = get_json(&client, server, &acme, "/api/v1/connections/stripe").await;
    assert_eq!(shown["base_url"], "https://api.stripe.com/v2/");

    // A read-only token reads but does not write; another tenant finds nothing of acme's.
    assert_eq!(
        answer(put("other", &reader, stripe.clone())).await.0,
        StatusCode::FORBIDDEN
    );
    let theirs = get_json(&client, server, &globex, "/api/v1/connections").await;
    assert_eq!(theirs["connections"], json!([]));
    let (status, _) = answer(
        client
            .get(server.url("/api/v1/connections/stripe"))
            .bearer_auth(&globex),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let delete = |token: &str| {
        client
            .delete(server.url("/api/v1/connections/stripe"))
            .bearer_auth(token)
    };
    assert_eq!(answer(delete(&globex)).await.0, StatusCode::NOT_FOUND);
    assert_eq!(answer(delete(&reader)).await.0, StatusCode::FORBIDDEN);

    // The plan bounds how many a tenant keeps.
    let (status, plan) = answer(
        client
            .put(server.url("/api/v1/tenants/acme/plan"))
            .bearer_auth(server.operator_token())
            .json(&json!({"max_connections": 1})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{plan}");
    let (status, err) = answer(put(
        "second",
        &acme,
        json!({"kind": "secret", "values": {"k": "value1"}}),
    ))
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{err}");
    assert!(err.to_string().contains("max_connections"), "{err}");
    assert_eq!(answer(delete(&acme)).await.0, StatusCode::NO_CONTENT);
    assert_eq!(answer(delete(&acme)).await.0, StatusCode::NOT_FOUND);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_connections_api_keeps_its_contract_on_sqlite() {
    let server = Server::start(&tempdir(), &[("DURABLE_MASTER_KEY", master_key())]).await;
    the_connections_api_keeps_its_contract(&server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_connections_api_keeps_its_contract_on_postgres() {
    let Some(url) = postgres_testing::fresh_database().await else {
        return;
    };
    let server = Server::start(
        &tempdir(),
        &[("DATABASE_URL", url), ("DURABLE_MASTER_KEY", master_key())],
    )
    .await;
    the_connections_api_keeps_its_contract(&server).await;
}

/// Without a master key a server keeps no connection (`503`, naming the variable); once one
/// is kept, a server without the key, or with another, refuses to start, saying what to set.
/// `durable connection` and its rotation work from the command line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_need_the_master_key_that_sealed_them() {
    let dir = tempdir();
    let client = reqwest::Client::new();
    let mut server = Server::start(&dir, &[]).await;
    let (status, err) = answer(
        client
            .put(server.url("/api/v1/connections/vault"))
            .bearer_auth(server.token("acme"))
            .json(&json!({"kind": "secret", "values": {"k": "value1"}})),
    )
    .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{err}");
    assert!(err.to_string().contains("DURABLE_MASTER_KEY"), "{err}");
    server.terminate();

    let db = server.db_url.clone();
    let (old, new) = (master_key(), master_key());
    let secret = fresh_secret();
    let with_key = |key: &str| -> Vec<(String, String)> {
        vec![
            ("DATABASE_URL".into(), db.clone()),
            ("DURABLE_MASTER_KEY".into(), key.to_owned()),
        ]
    };
    let run = |args: &[&str], envs: &[(String, String)]| {
        let out = std::process::Command::new(common::BIN)
            .args(args)
            .envs(envs.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .env("DURABLE_TENANT_SECRET", common::TENANT_SECRET)
            .output()
            .expect("run durable");
        assert!(out.status.success(), "durable {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let value = format!("api_key={secret}");
    let put = run(
        &[
            "connection",
            "put",
            "--tenant",
            "acme",
            "vault",
            "--kind",
            "secret",
            "--value",
            &value,
        ],
        &with_key(&old),
    );
    assert!(put.contains("created") && put.contains("api_key"), "{put}");
    let shown = run(
        &["connection", "show", "--tenant", "acme", "vault"],
        &with_key(&old),
    );
    assert!(
        shown.contains("api_key") && !shown.contains(&secret),
        "{shown}"
    );

    let serve = |envs: Vec<(&str, &str)>| {
        let mut all = vec![("DATABASE_URL", db.as_str())];
        all.extend(envs);
        common::refused(&["serve"], &all)
    };
    let refused = serve(vec![("DURABLE_TENANT_SECRET", common::TENANT_SECRET)]);
    assert!(refused.contains("set DURABLE_MASTER_KEY"), "{refused}");
    let refused = serve(vec![
        ("DURABLE_TENANT_SECRET", common::TENANT_SECRET),
        ("DURABLE_MASTER_KEY", &new),
    ]);
    assert!(refused.contains("DURABLE_MASTER_KEY_PREVIOUS"), "{refused}");
    let refused = serve(vec![
        ("DURABLE_TENANT_SECRET", common::TENANT_SECRET),
        ("DURABLE_MASTER_KEY", "not-hex"),
    ]);
    assert!(refused.contains("64 hex characters"), "{refused}");

    let mut rotating = with_key(&new);
    rotating.push(("DURABLE_MASTER_KEY_PREVIOUS".into(), old.clone()));
    let rotated = run(&["connection", "rotate-key"], &rotating);
    assert!(rotated.contains("1 data keys rewrapped"), "{rotated}");
    let server = Server::start(&dir, &[("DURABLE_MASTER_KEY", new.clone())]).await;
    let listed = get_json(
        &client,
        &server,
        &server.token("acme"),
        "/api/v1/connections",
    )
    .await;
    assert_eq!(listed["connections"][0]["name"], "vault", "{listed}");
}

/// One request the downstream server got: its path, headers and body.
type Request = (String, HashMap<String, String>, Bytes);

/// What the downstream server in the test saw, in order.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<Request>>>);

impl Seen {
    fn to(&self, path: &str) -> Vec<(HashMap<String, String>, Bytes)> {
        self.0
            .lock()
            .expect("lock")
            .iter()
            .filter(|(p, _, _)| p == path)
            .map(|(_, h, b)| (h.clone(), b.clone()))
            .collect()
    }
}

/// The downstream API: `/v1/charges` echoes the Authorization header it got; `/v1/flaky`
/// answers 500 once, then 200; `/v1/missing` 404; `/v1/hop` redirects to another origin (the
/// same server by name), `/v1/metadata` to the cloud metadata address.
async fn downstream(
    State((seen, port)): State<(Seen, u16)>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_owned();
    let headers_seen: HashMap<String, String> = headers
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_owned(),
                v.to_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    let earlier = seen.to(&path).len();
    seen.0
        .lock()
        .expect("lock")
        .push((path.clone(), headers_seen.clone(), body));
    match path.as_str() {
        "/v1/charges" => axum::Json(json!({
            "id": "ch_1",
            "echo_auth": headers_seen.get("authorization"),
        }))
        .into_response(),
        "/v1/flaky" if earlier == 0 => (Status::INTERNAL_SERVER_ERROR, "try again").into_response(),
        "/v1/flaky" => axum::Json(json!({"ok": true})).into_response(),
        "/v1/hop" => Redirect::to(&format!("http://localhost:{port}/landing")).into_response(),
        "/landing" => axum::Json(json!({"landed": true})).into_response(),
        "/v1/metadata" => Redirect::to("http://169.254.169.254/latest/meta-data/").into_response(),
        _ => (
            Status::NOT_FOUND,
            axum::Json(json!({"error": "no such thing"})),
        )
            .into_response(),
    }
}

/// An OTLP/HTTP receiver keeping every export's raw bytes.
async fn collector() -> (String, Arc<Mutex<Vec<u8>>>) {
    let received = Arc::new(Mutex::new(Vec::new()));
    let app = Router::new()
        .route(
            "/v1/traces",
            post(
                |State(all): State<Arc<Mutex<Vec<u8>>>>, body: Bytes| async move {
                    all.lock().expect("lock").extend_from_slice(&body);
                    ""
                },
            ),
        )
        .with_state(received.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let endpoint = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    (endpoint, received)
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_http_step_sends_the_secret_to_the_downstream_and_nowhere_else() {
    let seen = Seen::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let api = Router::new()
        .fallback(any(downstream))
        .with_state((seen.clone(), port));
    tokio::spawn(async move { axum::serve(listener, api).await });
    let (traces, exported) = collector().await;

    let dir = tempdir();
    let log = dir.join("stderr.log");
    let mut server = Server::start(
        &dir,
        &[
            ("DURABLE_MASTER_KEY", master_key()),
            ("DURABLE_CONNECTION_ALLOW", "127.0.0.1".to_owned()),
            ("DURABLE_LOG_FORMAT", "json".to_owned()),
            ("RUST_LOG", "debug".to_owned()),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", traces),
            (STDERR_TO, log.display().to_string()),
        ],
    )
    .await;
    let client = reqwest::Client::new();
    let acme = server.token("acme");
    let secret = fresh_secret();
    let connect = |name: &str, base_url: String| {
        client
            .put(server.url(&format!("/api/v1/connections/{name}")))
            .bearer_auth(&acme)
            .json(&json!({
                "kind": "http",
                "base_url": base_url,
                "secret_headers": {"Authorization": format!("Bearer {secret}")},
            }))
    };
    let (status, err) = answer(connect("api", format!("http://127.0.0.1:{port}/v1/"))).await;
    assert_eq!(status, StatusCode::CREATED, "{err}");
    let call = |connection: &str, method: &str, path: &str| {
        let client = client.clone();
        let (server, acme) = (&server, &acme);
        let body = json!({
            "workflow": "demo.http",
            "input": {"connection": connection, "method": method, "path": path, "body": {"amount": 100}},
        });
        async move {
            let run = start_run(&client, server, acme, body).await;
            let id = run["id"].as_str().expect("id").to_owned();
            (id, client)
        }
    };
    let finished = |id: String, client: reqwest::Client| {
        let (server, acme) = (&server, &acme);
        async move {
            for _ in 0..3 {
                let detail = wait_status(&client, server, acme, &id, "completed").await;
                let status = detail["run"]["status"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                if status == "completed" || status == "failed" {
                    return detail;
                }
            }
            panic!("run {id} did not finish");
        }
    };

    // The call: the downstream got the secret header and the body; the run's output holds
    // the echo of it as [redacted].
    let (id, c) = call("api", "POST", "charges").await;
    let detail = finished(id, c).await;
    assert_eq!(detail["run"]["status"], "completed", "{detail}");
    let output = &detail["run"]["output"];
    assert_eq!(output["status"], 200, "{output}");
    assert_eq!(output["body"]["id"], "ch_1");
    // The header's whole value is the secret: its echo is replaced whole.
    assert_eq!(output["body"]["echo_auth"], "[redacted]");
    let charges = seen.to("/v1/charges");
    assert_eq!(charges.len(), 1);
    assert_eq!(charges[0].0["authorization"], format!("Bearer {secret}"));
    assert_eq!(
        serde_json::from_slice::<Value>(&charges[0].1).expect("json"),
        json!({"amount": 100})
    );

    // A 5xx is retried with the step's backoff; a 4xx fails the step at once.
    let (id, c) = call("api", "GET", "flaky").await;
    let detail = finished(id, c).await;
    assert_eq!(detail["run"]["status"], "completed", "{detail}");
    assert_eq!(seen.to("/v1/flaky").len(), 2);
    let (id, c) = call("api", "GET", "missing").await;
    let detail = finished(id, c).await;
    assert_eq!(detail["run"]["status"], "failed", "{detail}");
    assert_eq!(
        detail["checkpoints"][0]["error"]["code"], "http_404",
        "{detail}"
    );
    assert_eq!(seen.to("/v1/missing").len(), 1);

    // A redirect to another origin is followed without the secret header.
    let (id, c) = call("api", "GET", "hop").await;
    let detail = finished(id, c).await;
    assert_eq!(
        detail["run"]["output"]["body"],
        json!({"landed": true}),
        "{detail}"
    );
    let landed = seen.to("/landing");
    assert_eq!(landed.len(), 1);
    assert!(
        !landed[0].0.contains_key("authorization"),
        "{:?}",
        landed[0].0
    );

    // SSRF probes: addresses the operator did not allow, literally or by redirect.
    let probes = [
        ("metadata", "http://169.254.169.254/latest/".to_owned()),
        ("private", "http://10.0.0.1/".to_owned()),
        ("loopback6", format!("http://[::1]:{port}/v1/")),
        ("unspecified", format!("http://0.0.0.0:{port}/v1/")),
        ("mapped", "http://[::ffff:a9fe:a9fe]/".to_owned()),
    ];
    for (name, base) in &probes {
        let (status, err) = answer(connect(name, base.clone())).await;
        assert_eq!(status, StatusCode::CREATED, "{err}");
    }
    let mut runs: Vec<(String, String)> = Vec::new();
    for (name, _) in &probes {
        runs.push((name.to_string(), call(name, "GET", "charges").await.0));
    }
    runs.push(("redirect".into(), call("api", "GET", "metadata").await.0));
    for (name, id) in runs {
        let detail = wait_status(&client, &server, &acme, &id, "failed").await;
        assert_eq!(detail["run"]["status"], "failed", "{name}: {detail}");
        let error = &detail["checkpoints"][0]["error"];
        assert_eq!(error["code"], "address_refused", "{name}: {detail}");
        assert!(
            error["message"]
                .as_str()
                .unwrap_or_default()
                .contains("DURABLE_CONNECTION_ALLOW"),
            "{name}: {error}"
        );
    }
    assert_eq!(
        seen.to("/v1/charges").len(),
        1,
        "no probe reached the downstream"
    );

    // The export and each run's exported history hold the runs, without the secret.
    let fetch = |path: String| {
        let (client, server, acme) = (&client, &server, &acme);
        async move {
            client
                .get(server.url(&path))
                .bearer_auth(acme)
                .send()
                .await
                .expect("export")
                .text()
                .await
                .expect("text")
        }
    };
    let mut export = fetch("/api/v1/runs/export".into()).await;
    let ids: Vec<String> = export
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|run| run["id"].as_str().map(str::to_owned))
        .collect();
    assert!(ids.len() >= 10, "the export lists the runs: {export}");
    for id in ids {
        export.push_str(&fetch(format!("/api/v1/runs/{id}/history")).await);
    }
    assert!(
        export.contains("[redacted]"),
        "the histories hold the calls"
    );
    assert!(!export.contains(&secret), "the export holds the secret");
    server.terminate();

    // Nor do the database files, the logs or the traces.
    let mut files = 0;
    for entry in std::fs::read_dir(&dir).expect("dir") {
        let path = entry.expect("entry").path();
        let name = path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        if name.starts_with("durable.db") {
            files += 1;
            let bytes = std::fs::read(&path).expect("read");
            assert!(!contains(&bytes, &secret), "{name} holds the secret");
        }
    }
    assert!(files >= 1, "no database file looked at");
    let logs = std::fs::read(&log).expect("logs");
    assert!(contains(&logs, "durable.http"), "the logs cover the calls");
    assert!(!contains(&logs, &secret), "the logs hold the secret");
    let traces = exported.lock().expect("lock").clone();
    assert!(
        contains(&traces, "durable.http"),
        "the traces cover the calls"
    );
    assert!(!contains(&traces, &secret), "the traces hold the secret");
}
