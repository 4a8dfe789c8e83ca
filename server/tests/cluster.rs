//! The cluster as separate OS processes: a control plane on PostgreSQL + Redis and store-less
//! tenant workers for `acme` and `globex`. Each tenant's steps run only on its own pool, and
//! misconfigured roles refuse to start with a message naming the fix.

mod common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use common::{Server, WorkerProcess, cli, get_json, refused, start_run, tempdir};
use durable::model::{Namespace, Scope};
use durable::store::postgres_testing;
use durable::transport::Transport;
use durable::transport::redis_testing::{fresh_transport, test_url};
use futures::StreamExt;
use serde_json::json;

/// A command line, its environment, and the fix its refusal must name.
type Refusal<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a str);

#[test]
fn misconfigured_roles_refuse_to_start_and_say_what_to_set() {
    let cases: [Refusal<'_>; 5] = [
        (
            &["worker"],
            &[("REDIS_URL", "redis://127.0.0.1:6379")],
            "--tenant NAME",
        ),
        (
            &["worker", "--tenant", "acme"],
            &[
                ("REDIS_URL", "redis://127.0.0.1:6379"),
                ("DATABASE_URL", "sqlite://x.db"),
            ],
            "unset DATABASE_URL",
        ),
        (
            &["worker", "--tenant", "acme"],
            &[
                ("REDIS_URL", "redis://127.0.0.1:6379"),
                ("DURABLE_NAMESPACE", "acme"),
            ],
            "a partition, not a namespace",
        ),
        (&["worker", "--tenant", "acme"], &[], "set REDIS_URL"),
        (
            &["control-plane"],
            &[("DURABLE_TENANT", "acme")],
            "set REDIS_URL",
        ),
    ];
    for (args, envs, fix) in cases {
        let said = refused(args, envs);
        assert!(
            said.contains(fix),
            "durable {args:?} said {said:?}, not {fix:?}"
        );
    }
    let said = refused(&["serve"], &[("REDIS_URL", "redis://127.0.0.1:6379")]);
    assert!(said.contains("durable control-plane"), "{said}");
    let said = refused(
        &["control-plane"],
        &[
            ("REDIS_URL", "redis://127.0.0.1:6379"),
            ("DURABLE_TENANT", "acme"),
        ],
    );
    assert!(said.contains("set DURABLE_NAMESPACE instead"), "{said}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_tenants_runs_execute_only_on_its_own_worker_pool() {
    let Some(redis) = fresh_transport().await else {
        return;
    };
    let Some(url) = postgres_testing::fresh_database().await else {
        return;
    };
    cli(&url, &["migrate"]);
    let effects = tempdir();
    let cluster = [
        ("REDIS_URL", test_url()),
        ("DURABLE_PREFIX", redis.prefix().to_owned()),
        ("DURABLE_DEMO_EFFECTS", effects.display().to_string()),
    ];
    let mut cp_env = cluster.to_vec();
    cp_env.push(("DATABASE_URL", url.clone()));
    let control_plane = Server::start_role(&tempdir(), "control-plane", &cp_env).await;
    let acme = WorkerProcess::start("acme", &cluster);
    let globex = WorkerProcess::start("globex", &cluster);

    // Both pools announce themselves on the wire's registry before any work is sent.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let tokens: Vec<String> = redis
            .worker_groups(&Scope::All)
            .await
            .expect("groups")
            .iter()
            .map(|g| g.token())
            .collect();
        if ["order.charge@acme", "order.charge@globex"]
            .iter()
            .all(|t| tokens.iter().any(|have| have == t))
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "workers never announced: {tokens:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let acme_only = redis
        .worker_groups(&Scope::Only(Namespace::tenant("acme").expect("ns")))
        .await
        .expect("groups");
    assert!(
        acme_only.iter().all(|g| g.token().ends_with("@acme")),
        "{acme_only:?}"
    );

    let client = reqwest::Client::new();
    let mut tenant_of: HashMap<String, &str> = HashMap::new();
    for tenant in ["acme", "globex"] {
        let token = control_plane.token(tenant);
        for i in 0..5 {
            let run = start_run(
                &client,
                &control_plane,
                &token,
                json!({ "workflow": "demo.order", "input": { "item": format!("{tenant}-{i}"), "delay_ms": 5 } }),
            )
            .await;
            tenant_of.insert(run["id"].as_str().expect("id").to_owned(), tenant);
        }
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    for (id, tenant) in &tenant_of {
        let token = control_plane.token(tenant);
        loop {
            let run = get_json(
                &client,
                &control_plane,
                &token,
                &format!("/api/v1/runs/{id}"),
            )
            .await;
            if run["run"]["status"] == "completed" {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "run {id} did not complete: {run}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    // Every step ran once, on its own tenant's worker process.
    let log = std::fs::read_to_string(effects.join("executions.log")).expect("log");
    let pid_of = HashMap::from([("acme", acme.pid()), ("globex", globex.pid())]);
    let mut executed = 0;
    for line in log.lines() {
        let mut fields = line.split('\t');
        let (Some(step_id), Some(_), Some(pid)) = (fields.next(), fields.next(), fields.next())
        else {
            panic!("bad log line {line:?}");
        };
        let run = step_id
            .rsplit_once(':')
            .map(|(run, _)| run)
            .expect("step id");
        let Some(tenant) = tenant_of.get(run) else {
            continue;
        };
        assert_eq!(
            pid, pid_of[tenant],
            "{tenant}'s step {step_id} ran on another pool"
        );
        executed += 1;
    }
    assert_eq!(
        executed,
        tenant_of.len() * 3,
        "three steps per run, each once"
    );

    // A store-less pod's only door is the control plane's responder, over Redis: its own runs
    // it may read; another tenant's it may not.
    let mut replies = redis.subscribe_run_replies().await.expect("replies");
    let acme_token = control_plane.token("acme");
    let run_of = |tenant: &str| {
        tenant_of
            .iter()
            .find(|(_, t)| **t == tenant)
            .map(|(id, _)| id.clone())
            .expect("a run")
    };
    for (request_id, run) in [("own", run_of("acme")), ("other", run_of("globex"))] {
        let request = json!({
            "requestId": request_id,
            "tenant": acme_token,
            "body": { "kind": "getRun", "runId": run },
        });
        redis
            .send_run_request(request.to_string())
            .await
            .expect("send");
        let reply = loop {
            let reply = tokio::time::timeout(Duration::from_secs(10), replies.next())
                .await
                .expect("a reply")
                .expect("open");
            if reply.request_id == request_id {
                break reply;
            }
        };
        if request_id == "own" {
            let data = reply.result.data.expect("data");
            assert_eq!(
                data["status"], "completed",
                "acme reads its own run: {data}"
            );
        } else {
            assert_eq!(reply.code(), Some("cross-tenant"), "{reply:?}");
        }
    }
    drop((acme, globex, control_plane));
}
