//! Spawns the real `durable` binary on a fresh SQLite file and a free port.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

pub const BIN: &str = env!("CARGO_BIN_EXE_durable");

/// The wire's signing secret every test server and CLI call is given, as a deployment must.
pub const TENANT_SECRET: &str = "test-tenant-secret-of-at-least-thirty-two-bytes";

pub struct Server {
    pub child: Child,
    pub base: String,
    pub db_url: String,
    port: u16,
    role: String,
    envs: Vec<(String, String)>,
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

pub fn db_url(dir: &Path) -> String {
    format!("sqlite://{}", dir.join("durable.db").display())
}

impl Server {
    /// Starts `durable serve` and waits until `/healthz` answers.
    pub async fn start(dir: &Path, envs: &[(&str, String)]) -> Server {
        Server::start_role(dir, "serve", envs).await
    }

    /// Starts `durable <role>` (`serve` or `control-plane`) and waits until `/healthz` answers.
    pub async fn start_role(dir: &Path, role: &str, envs: &[(&str, String)]) -> Server {
        let port = free_port();
        let mut s = Server {
            child: spawn(dir, port, role, envs),
            role: role.to_owned(),
            base: format!("http://127.0.0.1:{port}"),
            // A `DATABASE_URL` among `envs` (PostgreSQL) replaces the SQLite file.
            db_url: envs
                .iter()
                .find(|(k, _)| *k == "DATABASE_URL")
                .map_or_else(|| db_url(dir), |(_, v)| v.clone()),
            port,
            envs: envs
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        };
        s.wait_healthy().await;
        s
    }

    pub async fn restart(&mut self, dir: &Path) {
        let envs: Vec<(&str, String)> = self
            .envs
            .iter()
            .map(|(k, v)| (k.as_str(), v.clone()))
            .collect();
        self.child = spawn(dir, self.port, &self.role, &envs);
        self.wait_healthy().await;
    }

    async fn wait_healthy(&mut self) {
        let client = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(r) = client.get(format!("{}/healthz", self.base)).send().await
                && r.status().is_success()
            {
                return;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("durable exited early with {status}");
            }
            assert!(
                Instant::now() < deadline,
                "durable did not become healthy in 30 s"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// SIGKILL: no chance to finish or release anything.
    pub fn kill(&mut self) {
        self.child.kill().expect("kill");
        self.child.wait().expect("reap");
    }

    /// SIGTERM and wait for a clean exit.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill -TERM");
        self.child.wait().expect("wait")
    }

    pub fn token(&self, tenant: &str) -> String {
        cli(&self.db_url, &["token", "issue", "--tenant", tenant])
            .trim()
            .to_owned()
    }

    /// An operator API token (`durable token issue --operator`).
    pub fn operator_token(&self) -> String {
        cli(&self.db_url, &["token", "issue", "--operator"])
            .trim()
            .to_owned()
    }

    /// The wire's HMAC token of `tenant`, which SDK messages on Redis carry.
    pub fn wire_token(&self, tenant: &str) -> String {
        cli(
            &self.db_url,
            &["token", "issue", "--tenant", tenant, "--wire"],
        )
        .trim()
        .to_owned()
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }
}

impl Server {
    /// The path of the login form's server function, as the login page names it.
    pub async fn login_action(&self) -> String {
        let page = reqwest::get(self.url("/login"))
            .await
            .expect("GET /login")
            .text()
            .await
            .expect("html");
        page.split(r#"action=""#)
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .expect("the login form's action")
            .to_owned()
    }
}

/// Posts the login form to its server function `action` as a browser without wasm does (no
/// redirect followed), with extra `headers`; the answer.
pub async fn post_login_form(
    server: &Server,
    action: &str,
    email: &str,
    password: &str,
    headers: &[(&str, &str)],
) -> reqwest::Response {
    let mut request = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client")
        .post(server.url(action))
        .form(&[("email", email), ("password", password)]);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.expect("POST the login form")
}

/// The session cookie `answer` sets, whole (`name=value; attributes`), if it sets one.
pub fn set_session_cookie(answer: &reqwest::Response) -> Option<String> {
    answer
        .headers()
        .get_all(reqwest::header::SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.contains("durable_session="))
        .map(str::to_owned)
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Among a server's `envs`, not an environment variable: the file its stderr (its logs) goes
/// to.
pub const STDERR_TO: &str = "test:stderr-to";

fn spawn(dir: &Path, port: u16, role: &str, envs: &[(&str, String)]) -> Child {
    let mut cmd = Command::new(BIN);
    cmd.arg(role)
        .env("DATABASE_URL", db_url(dir))
        .env("DURABLE_BIND", format!("127.0.0.1:{port}"))
        .env("RUST_LOG", "warn")
        .env("DURABLE_TENANT_SECRET", TENANT_SECRET)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    for (k, v) in envs {
        if *k == STDERR_TO {
            let file = std::fs::File::create(v).expect("create the stderr file");
            cmd.stderr(Stdio::from(file));
        } else {
            cmd.env(k, v);
        }
    }
    cmd.spawn().expect("spawn durable")
}

/// A `durable worker --tenant TENANT` process (no database), killed when dropped.
pub struct WorkerProcess {
    pub child: Child,
}

impl WorkerProcess {
    pub fn start(tenant: &str, envs: &[(&str, String)]) -> WorkerProcess {
        Self::start_as(&["--tenant", tenant], envs)
    }

    /// `durable worker ARGS` (say `--namespace blue`) with `envs`.
    pub fn start_as(args: &[&str], envs: &[(&str, String)]) -> WorkerProcess {
        let mut cmd = Command::new(BIN);
        cmd.arg("worker")
            .args(args)
            .env_remove("DURABLE_TENANT")
            .env_remove("DURABLE_NAMESPACE")
            .env_remove("DATABASE_URL")
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        for (k, v) in envs {
            cmd.env(k, v);
        }
        WorkerProcess {
            child: cmd.spawn().expect("spawn durable worker"),
        }
    }

    pub fn pid(&self) -> String {
        self.child.id().to_string()
    }
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `durable ARGS` with exactly `envs` set (on top of a cleared DATABASE_URL/REDIS_URL),
/// expecting it to refuse to start; returns what it printed.
pub fn refused(args: &[&str], envs: &[(&str, &str)]) -> String {
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .env_remove("DATABASE_URL")
        .env_remove("REDIS_URL")
        .env_remove("DURABLE_TENANT")
        .env_remove("DURABLE_NAMESPACE");
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run durable");
    assert!(!out.status.success(), "durable {args:?} started: {out:?}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Runs a `durable` subcommand against `db_url` and returns its stdout; panics on failure.
pub fn cli(db_url: &str, args: &[&str]) -> String {
    let out = Command::new(BIN)
        .args(args)
        .env("DATABASE_URL", db_url)
        .env("DURABLE_TENANT_SECRET", TENANT_SECRET)
        .output()
        .expect("run durable");
    assert!(
        out.status.success(),
        "durable {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf8")
}

pub fn tempdir() -> PathBuf {
    tempfile::tempdir().expect("tempdir").keep()
}

pub async fn start_run(
    client: &reqwest::Client,
    server: &Server,
    token: &str,
    body: Value,
) -> Value {
    let r = client
        .post(server.url("/api/v1/runs"))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .expect("POST");
    assert_eq!(r.status(), 201, "start failed: {:?}", r.text().await);
    r.json().await.expect("json")
}

/// `GET path` with a bearer token, decoded as JSON (any status).
pub async fn get_json(client: &reqwest::Client, server: &Server, token: &str, path: &str) -> Value {
    client
        .get(server.url(path))
        .bearer_auth(token)
        .send()
        .await
        .expect("GET")
        .json()
        .await
        .expect("json")
}

/// Polls `GET /api/v1/runs/{id}` until the run reaches `status` (10 s at most); returns the
/// last detail read, so a failing assertion can show it.
pub async fn wait_status(
    client: &reqwest::Client,
    server: &Server,
    token: &str,
    id: &str,
    status: &str,
) -> Value {
    let mut last = Value::Null;
    for _ in 0..400 {
        last = get_json(client, server, token, &format!("/api/v1/runs/{id}")).await;
        if last["run"]["status"] == status {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    last
}

/// A fresh server with API tokens for tenants `acme` and `globex`, and a client.
pub async fn two_tenants() -> (Server, reqwest::Client, String, String) {
    let server = Server::start(&tempdir(), &[]).await;
    let (acme, globex) = (server.token("acme"), server.token("globex"));
    (server, reqwest::Client::new(), acme, globex)
}

/// An unmodified Python SDK worker process (`tests/python/<script>`), killed when dropped.
pub struct PythonWorker {
    child: Child,
    /// Kept open, so a line it prints later does not fail on a closed pipe.
    _stdout: std::io::BufReader<std::process::ChildStdout>,
}

impl PythonWorker {
    /// Starts `script` with `python` and `envs`; returns once it prints `READY`.
    pub fn start(python: &str, script: &str, envs: &[(&str, String)]) -> PythonWorker {
        use std::io::{BufRead, BufReader};
        let path = format!("{}/tests/python/{script}", env!("CARGO_MANIFEST_DIR"));
        let mut child = Command::new(python)
            .arg(path)
            .envs(envs.iter().map(|(k, v)| (*k, v.as_str())))
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the Python worker");
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let ready = (&mut stdout)
            .lines()
            .map_while(Result::ok)
            .any(|line| line.trim() == "READY");
        let worker = PythonWorker {
            child,
            _stdout: stdout,
        };
        assert!(ready, "the Python worker {script} did not start");
        worker
    }
}

impl PythonWorker {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL: no chance to finish or release anything.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for PythonWorker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One sample of an exposition: its metric name, its labels and its value.
#[derive(Debug)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// The samples of a Prometheus text exposition (label values here never hold `,` or `"`).
pub fn metric_samples(text: &str) -> Vec<Sample> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|line| {
            let (series, value) = line.rsplit_once(' ').expect("a value");
            let (name, labels) = match series.split_once('{') {
                Some((name, rest)) => (name, rest.trim_end_matches('}')),
                None => (series, ""),
            };
            let labels = labels
                .split(',')
                .filter(|l| !l.is_empty())
                .map(|pair| {
                    let (k, v) = pair.split_once('=').expect("a label");
                    (k.to_owned(), v.trim_matches('"').to_owned())
                })
                .collect();
            Sample {
                name: name.to_owned(),
                labels,
                value: value.parse().unwrap_or_else(|e| panic!("{e}: {line}")),
            }
        })
        .collect()
}

/// The value of `name` with exactly these labels, if present.
pub fn metric_value(all: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let wanted: BTreeMap<String, String> = labels
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    all.iter()
        .find(|s| s.name == name && s.labels == wanted)
        .map(|s| s.value)
}

/// `GET url` (a `/metrics`) with `token`, which must answer 200 in the Prometheus text format.
pub async fn scrape(client: &reqwest::Client, url: &str, token: &str) -> Vec<Sample> {
    let answer = client
        .get(url)
        .bearer_auth(token)
        .send()
        .await
        .expect("GET /metrics");
    assert_eq!(answer.status(), 200);
    let kind = answer.headers()["content-type"].to_str().expect("ascii");
    assert!(kind.starts_with("text/plain; version=0.0.4"), "{kind}");
    metric_samples(&answer.text().await.expect("body"))
}

/// Logs `email` in on `server` as a browser without wasm does (a plain post of the login
/// form to its own action) and returns the session cookie it was given.
pub async fn session_cookie(server: &Server, email: &str, password: &str) -> String {
    let action = server.login_action().await;
    let answer = post_login_form(server, &action, email, password, &[]).await;
    set_session_cookie(&answer)
        .and_then(|v| v.split(';').next().map(str::to_owned))
        .unwrap_or_else(|| panic!("no session after logging in: {}", answer.status()))
}
