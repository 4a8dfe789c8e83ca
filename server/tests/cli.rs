//! The admin commands against the real binary: good input works, bad input is refused with a
//! message that names the fix, and nothing is changed by a refused command.

mod common;

use std::io::Write;
use std::process::{Command, Output, Stdio};

use common::{BIN, db_url, tempdir};

fn durable(db: &str, args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(BIN)
        .args(args)
        .env("DATABASE_URL", db)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut input = child.stdin.take().expect("stdin");
    if let Some(text) = stdin {
        input.write_all(text.as_bytes()).expect("write stdin");
    }
    drop(input);
    child.wait_with_output().expect("wait")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn user_add_generates_or_reads_a_password_and_refuses_bad_input() {
    let dir = tempdir();
    let db = db_url(&dir);
    let out = durable(
        &db,
        &[
            "user",
            "add",
            "--tenant",
            "acme",
            "--role",
            "admin",
            "--email",
            "Ada@Acme.test",
        ],
        None,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("added ada@acme.test (admin of acme)"),
        "{stdout}"
    );
    let password = stdout
        .lines()
        .find_map(|l| l.strip_prefix("password: "))
        .expect("a generated password is printed");
    assert!(password.len() >= 16);

    let out = durable(
        &db,
        &[
            "user",
            "add",
            "--role",
            "operator",
            "--email",
            "ops@x.test",
            "--password-stdin",
        ],
        Some("correct horse battery\n"),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("password:"),
        "a password read from stdin is not echoed"
    );

    let refused: [(&[&str], Option<&str>, &str); 7] = [
        (
            &[
                "user",
                "add",
                "--tenant",
                "acme",
                "--role",
                "admin",
                "--email",
                "ada@acme.test",
            ],
            None,
            "already exists",
        ),
        (
            &[
                "user", "add", "--tenant", "acme", "--role", "operator", "--email", "o@x.test",
            ],
            None,
            "drop --tenant",
        ),
        (
            &["user", "add", "--role", "viewer", "--email", "v@x.test"],
            None,
            "pass --tenant",
        ),
        (
            &[
                "user", "add", "--tenant", "Acme", "--role", "viewer", "--email", "v@x.test",
            ],
            None,
            "lowercase",
        ),
        (
            &[
                "user", "add", "--tenant", "default", "--role", "viewer", "--email", "v@x.test",
            ],
            None,
            "reserved",
        ),
        (
            &[
                "user",
                "add",
                "--tenant",
                "acme",
                "--role",
                "viewer",
                "--email",
                "v@x.test",
                "--password-stdin",
            ],
            Some("short\n"),
            "at least 8",
        ),
        (
            &[
                "user", "add", "--tenant", "acme", "--role", "king", "--email", "v@x.test",
            ],
            None,
            "use viewer, admin or operator",
        ),
    ];
    for (args, stdin, message) in refused {
        let out = durable(&db, args, stdin);
        assert!(!out.status.success(), "{args:?} must be refused");
        assert!(
            stderr(&out).contains(message),
            "{args:?}: expected `{message}` in {}",
            stderr(&out)
        );
    }
    // The refused `v@x.test` was never created: adding it properly works.
    let out = durable(
        &db,
        &[
            "user", "add", "--tenant", "acme", "--role", "viewer", "--email", "v@x.test",
        ],
        None,
    );
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn tokens_are_issued_listed_and_revoked_one_by_one_and_wire_tokens_stay_stable() {
    let dir = tempdir();
    let db = db_url(&dir);
    let issue = |args: &[&str]| {
        let out = durable(&db, args, None);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    let a = issue(&["token", "issue", "--tenant", "acme", "--name", "ci"]);
    let b = issue(&[
        "token",
        "issue",
        "--tenant",
        "acme",
        "--read-only",
        "--expires-in",
        "30d",
    ]);
    assert!(a.starts_with("dtk_") && b.starts_with("dtk_"), "{a} {b}");
    assert_ne!(a, b, "each issue is a token of its own");
    let listed = issue(&["token", "list", "--tenant", "acme"]);
    assert_eq!(listed.lines().count(), 2, "{listed}");
    assert!(listed.contains("read-write\tlive\tci"), "{listed}");
    assert!(listed.contains("read\texpires in 30d\tcli"), "{listed}");
    let id = &a["dtk_".len()..a.len() - 65];
    assert!(issue(&["token", "revoke", id]).contains("revoked"));
    assert!(issue(&["token", "list", "--tenant", "acme"]).contains("revoked\tci"));
    let again = durable(&db, &["token", "revoke", id], None);
    assert!(
        !again.status.success(),
        "a revoked token is not revoked twice"
    );
    assert!(issue(&["token", "list", "--tenant", "globex"]).is_empty());

    // The wire's HMAC tokens: a function of the tenant and the configured secret, which a
    // deployment must set.
    let unset = durable(&db, &["token", "issue", "--tenant", "acme", "--wire"], None);
    assert!(!unset.status.success());
    assert!(
        stderr(&unset).contains("DURABLE_TENANT_SECRET is not set"),
        "{}",
        stderr(&unset)
    );
    let w1 = common::cli(&db, &["token", "issue", "--tenant", "acme", "--wire"])
        .trim()
        .to_owned();
    let w2 = common::cli(&db, &["token", "issue", "--tenant", "acme", "--wire"])
        .trim()
        .to_owned();
    assert_eq!(w1, w2, "the secret is kept, so wire tokens are stable");
    assert!(w1.starts_with("acme."));
    for bad in ["system", "a:b", ""] {
        let out = durable(&db, &["token", "issue", "--tenant", bad], None);
        assert!(!out.status.success(), "tenant {bad:?} must be refused");
    }
    for bad in ["0d", "12", "5y"] {
        let out = durable(
            &db,
            &["token", "issue", "--tenant", "acme", "--expires-in", bad],
            None,
        );
        assert!(!out.status.success(), "lifetime {bad:?} must be refused");
    }
}

#[test]
fn unsupported_or_unreachable_database_urls_stop_start_up_with_the_fix() {
    // A PostgreSQL URL whose database does not exist: refused, naming the database, with the
    // password kept out of the message.
    let out = durable(
        "postgres://postgres:hunter2@127.0.0.1:5432/durable_no_such_database",
        &["migrate"],
        None,
    );
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("durable_no_such_database"), "{err}");
    assert!(!err.contains("hunter2"), "the password leaked: {err}");
    let out = durable("mysql://x", &["migrate"], None);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("is not supported"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_turn_limit_out_of_range_is_refused_before_start_up() {
    // Refused by the flag's own check: nothing is opened, bound or started.
    for bad in ["0", "100001", "many"] {
        let out = durable(
            "sqlite:///nonexistent/dir/durable.db",
            &["serve", "--max-turns", bad],
            None,
        );
        assert!(!out.status.success(), "--max-turns {bad} was accepted");
        let err = stderr(&out);
        assert!(err.contains("--max-turns"), "{err}");
        assert!(err.contains(bad), "{err}");
    }
}

#[tokio::test]
async fn run_verbs_on_the_cli_respect_the_tenant_and_report_clearly() {
    let dir = tempdir();
    let server = common::Server::start(&dir, &[]).await;
    let client = reqwest::Client::new();
    let acme = server.token("acme");
    let run = common::start_run(
        &client,
        &server,
        &acme,
        serde_json::json!({"workflow": "demo.approval", "input": {}}),
    )
    .await;
    let id = run["id"].as_str().unwrap().to_owned();
    let db = server.db_url.clone();
    let cli = move |args: Vec<String>| {
        let db = db.clone();
        async move {
            tokio::task::spawn_blocking(move || {
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                durable(&db, &args, None)
            })
            .await
            .unwrap()
        }
    };
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    // Another tenant's view cannot see it (`default`'s neither, nor a namespaced control
    // plane's); bad JSON is refused.
    for (flag, other) in [
        ("--tenant", "globex"),
        ("--tenant", "default"),
        ("--namespace", "globex"),
    ] {
        let out = cli(s(&["run", flag, other, "signal", &id, "--name", "approve"])).await;
        assert!(
            !out.status.success() && stderr(&out).contains("visible"),
            "{flag} {other}: {}",
            stderr(&out)
        );
    }
    let out = cli(s(&[
        "run",
        "--tenant",
        "acme",
        "--namespace",
        "acme",
        "signal",
        &id,
        "--name",
        "approve",
    ]))
    .await;
    assert!(
        !out.status.success() && stderr(&out).contains("not both"),
        "{}",
        stderr(&out)
    );
    let out = cli(s(&[
        "run",
        "signal",
        &id,
        "--name",
        "approve",
        "--payload",
        "{oops",
    ]))
    .await;
    assert!(
        !out.status.success() && stderr(&out).contains("not valid JSON"),
        "{}",
        stderr(&out)
    );
    // Query and update: the answer on stdout; a refused update fails, naming why.
    let out = cli(s(&["run", "--tenant", "acme", "query", &id, "state"])).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("\"waiting\""),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let out = cli(s(&["run", "--tenant", "globex", "query", &id, "state"])).await;
    assert!(
        !out.status.success() && stderr(&out).contains("visible"),
        "{}",
        stderr(&out)
    );
    let out = cli(s(&[
        "run",
        "update",
        &id,
        "approve",
        "--arg",
        "{\"by\":\"\"}",
    ]))
    .await;
    assert!(
        !out.status.success() && stderr(&out).contains("`by`"),
        "{}",
        stderr(&out)
    );
    let out = cli(s(&[
        "run",
        "--tenant",
        "acme",
        "signal",
        &id,
        "--name",
        "approve",
        "--payload",
        "{\"by\":\"cli\"}",
    ]))
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    let done = common::wait_status(&client, &server, &acme, &id, "completed").await;
    assert_eq!(
        done["run"]["output"],
        serde_json::json!({"approved": {"by": "cli"}})
    );
    let out = cli(s(&["run", "cancel", &id])).await;
    assert!(
        !out.status.success() && stderr(&out).contains("it is completed"),
        "{}",
        stderr(&out)
    );
    let out = cli(s(&["run", "retry-with-input", &id, "--input", "{}"])).await;
    assert!(out.status.success(), "{}", stderr(&out));
}

#[tokio::test]
async fn events_and_signal_with_start_on_the_cli() {
    let dir = tempdir();
    let server = common::Server::start(&dir, &[]).await;
    let client = reqwest::Client::new();
    let acme = server.token("acme");
    let run = common::start_run(
        &client,
        &server,
        &acme,
        serde_json::json!({"workflow": "demo.parcel", "input": {"order": "o-5"}}),
    )
    .await;
    let id = run["id"].as_str().unwrap().to_owned();
    let db = server.db_url.clone();
    let cli = move |args: Vec<&'static str>| {
        let db = db.clone();
        tokio::task::spawn_blocking(move || durable(&db, &args, None))
    };
    // Published until the run waits for it (the first may come before its wait).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let out = cli(vec![
            "event",
            "--tenant",
            "acme",
            "parcel.delivered",
            "--key",
            "o-5",
            "--payload",
            "{\"at\":\"desk\"}",
        ])
        .await
        .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        if String::from_utf8_lossy(&out.stdout).contains("\"delivered\": 1") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "never delivered");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let done = common::wait_status(&client, &server, &acme, &id, "completed").await;
    assert_eq!(
        done["run"]["output"]["delivered"],
        serde_json::json!({"at": "desk"})
    );
    let out = cli(vec!["event", "parcel.delivered"]).await.unwrap();
    assert!(
        !out.status.success() && stderr(&out).contains("--tenant"),
        "{}",
        stderr(&out)
    );
    let out = cli(vec!["event", "--tenant", "acme", "x", "--payload", "{oops"])
        .await
        .unwrap();
    assert!(
        !out.status.success() && stderr(&out).contains("not valid JSON"),
        "{}",
        stderr(&out)
    );

    // Signal-with-start: the run is started, then signalled; the tenant is required.
    let swl = |tenant: bool| {
        let mut args = vec!["run"];
        if tenant {
            args.extend(["--tenant", "acme"]);
        }
        args.extend([
            "signal",
            "approval-cli",
            "--name",
            "approve",
            "--payload",
            "{\"by\":\"cli\"}",
            "--start",
            "demo.approval",
        ]);
        args
    };
    let out = cli(swl(false)).await.unwrap();
    assert!(
        !out.status.success() && stderr(&out).contains("--tenant"),
        "{}",
        stderr(&out)
    );
    let out = cli(swl(true)).await.unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("started, then sent"));
    let done = common::wait_status(&client, &server, &acme, "approval-cli", "completed").await;
    assert_eq!(
        done["run"]["output"],
        serde_json::json!({"approved": {"by": "cli"}})
    );
}
