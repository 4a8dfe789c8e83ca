//! The cluster as separate OS processes: a control plane on PostgreSQL + Redis and store-less
//! tenant workers for `acme` and `globex`. Each tenant's steps run only on its own pool, and
//! misconfigured roles refuse to start with a message naming the fix.

mod common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use common::{
    PythonWorker, Server, WorkerProcess, cli, get_json, refused, start_run, tempdir, wait_status,
};
use durable::model::{Namespace, Scope};
use durable::store::postgres_testing;
use durable::transport::redis_testing::{fresh_transport, test_url};
use durable::transport::{RedisConfig, RedisTransport, RunRequests, StepQueues, WorkerRegistry};
use futures::StreamExt;
use serde_json::json;

/// A command line, its environment, and the fix its refusal must name.
type Refusal<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a str);

#[test]
fn misconfigured_roles_refuse_to_start_and_say_what_to_set() {
    let cases: [Refusal<'_>; 6] = [
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
            "not both",
        ),
        (&["worker", "--tenant", "acme"], &[], "set REDIS_URL"),
        (
            &["worker", "--tenant", "acme"],
            &[
                ("REDIS_URL", "redis://127.0.0.1:6379"),
                ("DURABLE_WIRE_TOKEN", "globex.c2lnbmF0dXJl"),
            ],
            "give it `acme`'s",
        ),
        (
            &["worker", "--pool", "gpu"],
            &[
                ("REDIS_URL", "redis://127.0.0.1:6379"),
                ("DURABLE_WIRE_TOKEN", "acme.c2lnbmF0dXJl"),
            ],
            "unset DURABLE_WIRE_TOKEN",
        ),
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
    // A deployment (no --demo) configures the wire's secret rather than keeping one in the
    // database.
    let dir = common::tempdir();
    let said = refused(
        &["serve"],
        &[
            ("DATABASE_URL", &common::db_url(&dir)),
            ("DURABLE_BIND", "127.0.0.1:0"),
        ],
    );
    assert!(said.contains("DURABLE_TENANT_SECRET is not set"), "{said}");
    let said = refused(
        &["control-plane"],
        &[
            ("REDIS_URL", "redis://127.0.0.1:6379"),
            ("DURABLE_TENANT", "acme"),
        ],
    );
    assert!(said.contains("set DURABLE_NAMESPACE instead"), "{said}");
}

/// A control plane on a fresh PostgreSQL database and Redis prefix, its demo steps logging to
/// `effects`, and the environment its workers share.
struct Cluster {
    /// A transport on the cluster's shared prefix.
    transport: RedisTransport,
    effects: std::path::PathBuf,
    env: Vec<(&'static str, String)>,
    control_plane: Server,
}

impl Cluster {
    /// `None` where the suites of PostgreSQL or Redis are skipped.
    async fn start(control_plane_env: &[(&'static str, String)]) -> Option<Cluster> {
        let transport = fresh_transport().await?;
        let url = postgres_testing::fresh_database().await?;
        cli(&url, &["migrate"]);
        let effects = tempdir();
        let env = vec![
            ("REDIS_URL", test_url()),
            ("DURABLE_PREFIX", transport.prefix().to_owned()),
            ("DURABLE_DEMO_EFFECTS", effects.display().to_string()),
        ];
        let mut cp_env = env.clone();
        cp_env.push(("DATABASE_URL", url));
        cp_env.extend(control_plane_env.iter().cloned());
        let control_plane = Server::start_role(&tempdir(), "control-plane", &cp_env).await;
        Some(Cluster {
            transport,
            effects,
            env,
            control_plane,
        })
    }
}

/// A control plane started with `--namespace blue` keeps its traffic under `<prefix>-blue`
/// (spec §6): `durable worker --namespace blue` runs its steps, and a tenant worker of `blue` on
/// the shared prefix never sees them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespaced_control_plane_keeps_its_traffic_under_its_own_prefix() {
    let Some(Cluster {
        transport: shared,
        effects,
        env: cluster,
        control_plane,
    }) = Cluster::start(&[("DURABLE_NAMESPACE", "blue".into())]).await
    else {
        return;
    };
    let namespaced = WorkerProcess::start_as(&["--namespace", "blue"], &cluster);
    let partitioned = WorkerProcess::start("blue", &cluster);
    let blue = Namespace::tenant("blue").expect("ns");
    let under_blue = RedisTransport::connect(RedisConfig {
        prefix: shared.prefix().to_owned(),
        namespace: Some(blue.clone()),
        ..RedisConfig::new(test_url())
    })
    .await
    .expect("redis");

    // Each worker announces itself under its own prefix.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let announced = |groups: Vec<durable::model::WorkerGroup>| {
            groups
                .iter()
                .any(|g| g.token() == "order.charge@blue" && g.workers == 1)
        };
        if announced(under_blue.worker_groups(&Scope::All).await.expect("groups"))
            && announced(shared.worker_groups(&Scope::All).await.expect("groups"))
        {
            break;
        }
        assert!(Instant::now() < deadline, "workers never announced");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let client = reqwest::Client::new();
    let token = control_plane.token("blue");
    let mut ids = Vec::new();
    for i in 0..3 {
        let run = start_run(
            &client,
            &control_plane,
            &token,
            json!({ "workflow": "demo.order", "input": { "item": format!("blue-{i}"), "delay_ms": 0 } }),
        )
        .await;
        assert_eq!(run["namespace"], "blue", "{run}");
        ids.push(run["id"].as_str().expect("id").to_owned());
    }
    for id in &ids {
        let run = wait_status(&client, &control_plane, &token, id, "completed").await;
        assert_eq!(run["run"]["status"], "completed", "{run}");
    }

    // Every step ran on the namespaced worker, none on the shared prefix's.
    let log = std::fs::read_to_string(effects.join("executions.log")).expect("log");
    let pids: Vec<&str> = log.lines().filter_map(|l| l.split('\t').nth(2)).collect();
    assert_eq!(pids.len(), ids.len() * 3, "three steps per run: {log}");
    assert!(
        pids.iter().all(|pid| *pid == namespaced.pid()),
        "a step left blue's prefix: {log} (namespaced {}, partitioned {})",
        namespaced.pid(),
        partitioned.pid()
    );
    drop((namespaced, partitioned, control_plane));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_tenants_runs_execute_only_on_its_own_worker_pool() {
    let Some(Cluster {
        transport: redis,
        effects,
        env: cluster,
        control_plane,
    }) = Cluster::start(&[]).await
    else {
        return;
    };
    let acme = WorkerProcess::start("acme", &cluster);
    let globex = WorkerProcess::start("globex", &cluster);
    // An un-partitioned worker (the unmodified Python SDK's, serving the same step names on
    // bare tokens) must never receive a tenant's step.
    let bare_log = effects.join("bare.log");
    let bare = durable::transport::redis_testing::python().map(|python| {
        let mut env = cluster.to_vec();
        env.push(("DURABLE_BARE_LOG", bare_log.display().to_string()));
        PythonWorker::start(&python, "bare_worker.py", &env)
    });

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
        let bare_token = bare.as_ref().map(|_| "order.charge@default");
        if ["order.charge@acme", "order.charge@globex"]
            .iter()
            .chain(&bare_token)
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
    if bare.is_some() {
        let ran = std::fs::read_to_string(&bare_log).unwrap_or_default();
        assert_eq!(ran, "", "the un-partitioned worker ran a tenant's steps");
        // It does run what is sent to its bare token: it would have logged a misrouted step.
        let run_id = durable::model::RunId::parse("run-bare-probe").expect("id");
        redis
            .dispatch(durable::model::RemoteTask {
                step_id: durable::model::step_id(&run_id, 0),
                run_id,
                seq: 0,
                name: "order.charge".into(),
                group: "order.charge".into(),
                input: Some(json!({})),
                context: None,
                traceparent: None,
                attempt: 1,
                reply_to: None,
                priority: None,
                receipt: Default::default(),
            })
            .await
            .expect("send");
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::fs::read_to_string(&bare_log).unwrap_or_default() != "order.charge\n" {
            assert!(
                Instant::now() < deadline,
                "the bare worker never ran its own step"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    // The operator view of this control plane lists both tenants' loads (each has a run
    // sleeping now) and both pools.
    for tenant in ["acme", "globex"] {
        let body = json!({ "workflow": "demo.sleepy", "input": { "seconds": 600 } });
        start_run(&client, &control_plane, &control_plane.token(tenant), body).await;
    }
    let operator = "op@cluster.test";
    let added = cli(
        &control_plane.db_url,
        &["user", "add", "--role", "operator", "--email", operator],
    );
    let password = added
        .lines()
        .find_map(|l| l.strip_prefix("password: "))
        .expect("a generated password");
    let cookie = common::session_cookie(&control_plane, operator, password).await;
    let page = client
        .get(control_plane.url("/operator"))
        .header(reqwest::header::COOKIE, &cookie)
        .send()
        .await
        .expect("GET /operator")
        .text()
        .await
        .expect("html");
    for shown in [
        "operator · all namespaces",
        r#"data-namespace="acme""#,
        r#"data-namespace="globex""#,
        r#"data-token="order.charge@acme""#,
        r#"data-token="order.charge@globex""#,
    ] {
        assert!(page.contains(shown), "the operator view lacks {shown}");
    }

    // A store-less pod's only door is the control plane's responder, over Redis: its own runs
    // it may read; another tenant's it may not.
    let mut replies = redis.subscribe_run_replies().await.expect("replies");
    let acme_token = control_plane.wire_token("acme");
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
    drop((acme, globex, bare, control_plane));
}

/// `durable worker` with no tenant serves the default partition, the bare
/// `durable-tasks-<step>` queues, as an SDK worker without a partition does, and announces
/// itself as what it is: `runtime: "rust"`, no partition. A job it takes is `active` while its
/// step runs, and `completed` only once the step has answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untenanted_worker_serves_the_default_partition_and_says_it_is_rust() {
    use durable::StartRun;
    use durable::model::RunStatus;
    use durable::store::{SqliteStore, Store};

    let Some(transport) = fresh_transport().await else {
        return;
    };
    let events_key = format!("bull:{}-tasks-order.charge:events", transport.prefix());
    let effects = tempdir();
    let env = vec![
        ("REDIS_URL", test_url()),
        ("DURABLE_PREFIX", transport.prefix().to_owned()),
        ("DURABLE_DEMO_EFFECTS", effects.display().to_string()),
    ];
    let worker = WorkerProcess::start_as(&[], &env);

    // It announces the bare tokens, as rust, with no partition.
    let deadline = Instant::now() + Duration::from_secs(30);
    let descriptors = loop {
        let found = transport
            .worker_descriptors("order.charge")
            .await
            .expect("descriptors");
        if !found.is_empty() {
            break found;
        }
        assert!(
            Instant::now() < deadline,
            "the worker never announced itself"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(descriptors[0].runtime, "rust");
    assert_eq!(descriptors[0].partition, None);

    // A control plane's run in the default namespace has its steps run there.
    let dir = tempdir();
    let store: std::sync::Arc<dyn Store> = std::sync::Arc::new(
        SqliteStore::connect(&common::db_url(&dir))
            .await
            .expect("store"),
    );
    let mut registry = durable::Registry::new();
    registry.workflow(
        "relay",
        1,
        |ctx: durable::prelude::WorkflowContext, input: serde_json::Value| async move {
            let charged: serde_json::Value = ctx.step("order.charge", &input).await?;
            Ok::<_, durable::prelude::WorkflowError>(charged)
        },
    );
    let engine = durable::Engine::new(
        store.clone(),
        std::sync::Arc::new(transport),
        std::sync::Arc::new(registry),
        durable::EngineConfig::default(),
    );
    engine.start().await.expect("engine");
    let run = engine
        .start_run(StartRun {
            workflow: "relay".into(),
            input: json!({ "item": "bare", "delay_ms": 1500 }),
            ..StartRun::default()
        })
        .await
        .expect("start");
    assert_eq!(run.namespace, Namespace::default_ns());
    let client = redis::Client::open(test_url()).expect("url");
    let mut redis = client
        .get_multiplexed_async_connection()
        .await
        .expect("redis");
    let events = |redis: &mut redis::aio::MultiplexedConnection| {
        let key = events_key.clone();
        let mut redis = redis.clone();
        async move {
            let entries: Vec<(String, Vec<(String, String)>)> = redis::cmd("XRANGE")
                .arg(&key)
                .arg("-")
                .arg("+")
                .query_async(&mut redis)
                .await
                .expect("XRANGE");
            entries
                .into_iter()
                .filter_map(|(_, fields)| {
                    fields
                        .into_iter()
                        .find(|(k, _)| k == "event")
                        .map(|(_, v)| v)
                })
                .collect::<Vec<String>>()
        }
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while !events(&mut redis).await.iter().any(|e| e == "active") {
        assert!(Instant::now() < deadline, "the worker never took the job");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let while_running = events(&mut redis).await;
    assert!(
        !while_running.iter().any(|e| e == "completed"),
        "the job was recorded completed while its step ran: {while_running:?}"
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    let done = loop {
        let now = store
            .get_run(&Scope::All, &run.id)
            .await
            .expect("get")
            .expect("run");
        if now.status.is_terminal() {
            break now;
        }
        assert!(Instant::now() < deadline, "the run never ended: {now:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(done.status, RunStatus::Completed, "{done:?}");
    assert_eq!(done.output.expect("output")["charged"], true);
    let after = events(&mut redis).await;
    assert!(after.iter().any(|e| e == "completed"), "{after:?}");
    let log = std::fs::read_to_string(effects.join("executions.log")).expect("log");
    let pid = log.lines().next().and_then(|l| l.split('\t').nth(2));
    assert_eq!(pid, Some(worker.pid().as_str()), "{log}");
    engine.shutdown().await;
}

/// Every role serves `/metrics`: a store-less tenant worker answers the scrape secret it was
/// started with (and 401 to anything else, an operator token included) with its own step timings, and the control plane on
/// PostgreSQL counts the same runs, exactly, from the counts its store keeps.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_and_its_control_plane_each_serve_their_metrics_to_an_operator() {
    let Some(Cluster {
        env, control_plane, ..
    }) = Cluster::start(&[]).await
    else {
        return;
    };
    let operator = control_plane.operator_token();
    let scrape = "a-scrape-secret-of-at-least-32-characters";
    let port = common::free_port();
    let mut worker_env = env.clone();
    worker_env.push(("DURABLE_METRICS_BIND", format!("127.0.0.1:{port}")));
    worker_env.push(("DURABLE_METRICS_TOKEN", scrape.to_owned()));
    let _worker = WorkerProcess::start("acme", &worker_env);
    let said = refused(
        &["worker", "--tenant", "acme"],
        &[
            ("REDIS_URL", "redis://127.0.0.1:6379"),
            ("DURABLE_METRICS_BIND", "127.0.0.1:0"),
            ("DURABLE_METRICS_TOKEN", "hunter2"),
        ],
    );
    assert!(said.contains("32 characters at least"), "{said}");

    let client = reqwest::Client::new();
    let acme = control_plane.token("acme");
    let mut ids = Vec::new();
    for i in 0..2 {
        let run = start_run(
            &client,
            &control_plane,
            &acme,
            json!({ "workflow": "demo.order", "input": { "item": format!("m-{i}"), "delay_ms": 0 } }),
        )
        .await;
        ids.push(run["id"].as_str().expect("id").to_owned());
    }
    for id in &ids {
        let last = wait_status(&client, &control_plane, &acme, id, "completed").await;
        assert_eq!(last["run"]["status"], "completed", "{last}");
    }

    let worker_metrics = format!("http://127.0.0.1:{port}/metrics");
    for token in [None, Some(&*operator), Some(&*acme)] {
        let mut get = client.get(&worker_metrics);
        if let Some(token) = token {
            get = get.bearer_auth(token);
        }
        let answer = get.send().await.expect("GET the worker's /metrics");
        assert_eq!(answer.status(), 401, "{token:?}");
    }
    let ran = common::scrape(&client, &worker_metrics, scrape).await;
    assert_eq!(
        common::metric_value(
            &ran,
            "durable_worker_step_seconds_count",
            &[
                ("tenant", "acme"),
                ("step", "order.ship"),
                ("outcome", "completed")
            ]
        ),
        Some(2.0),
        "the worker times each step it ran"
    );

    let counted = common::scrape(&client, &control_plane.url("/metrics"), &operator).await;
    let of = |name: &str, labels: &[(&str, &str)]| common::metric_value(&counted, name, labels);
    assert_eq!(
        of(
            "durable_runs_started_total",
            &[("tenant", "acme"), ("workflow", "demo.order")]
        ),
        Some(2.0)
    );
    assert_eq!(
        of(
            "durable_runs",
            &[
                ("tenant", "acme"),
                ("workflow", "demo.order"),
                ("status", "completed")
            ]
        ),
        Some(2.0)
    );
    assert_eq!(
        of(
            "durable_step_duration_seconds_count",
            &[("tenant", "acme"), ("step", "order.ship")]
        ),
        Some(2.0),
        "the control plane times the steps its remote workers ran"
    );
}

/// `durable worker --tenant acme --pool gpu` serves partition `acme.gpu`: it announces itself
/// there (not on acme's own partition), and the tenant's pool lists it as live.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_worker_serves_its_pools_partition_and_the_pool_lists_it() {
    let Some(cluster) = Cluster::start(&[]).await else {
        return;
    };
    let server = &cluster.control_plane;
    let client = reqwest::Client::new();
    let acme = server.token("acme");
    let created = client
        .put(server.url("/api/v1/pools/gpu"))
        .bearer_auth(&acme)
        .json(&serde_json::json!({"labels": {"gpu": "a100"}}))
        .send()
        .await
        .expect("put");
    assert_eq!(created.status(), reqwest::StatusCode::CREATED);
    let _worker = WorkerProcess::start_as(&["--tenant", "acme", "--pool", "gpu"], &cluster.env);
    let deadline = Instant::now() + Duration::from_secs(30);
    // The worker announces each of its steps' tokens in turn: wait for the one looked at.
    let charges = |pool: &serde_json::Value| {
        pool["workers"].as_array().is_some_and(|w| {
            w.iter()
                .any(|w| w["name"] == "order.charge" && w["workers"] == 1)
        })
    };
    let pool = loop {
        let pool = get_json(&client, server, &acme, "/api/v1/pools/gpu").await;
        if charges(&pool) {
            break pool;
        }
        assert!(
            Instant::now() < deadline,
            "the pool never listed its worker: {pool}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(pool["partition"], "acme.gpu");
    let charge = pool["workers"]
        .as_array()
        .and_then(|w| w.iter().find(|w| w["name"] == "order.charge"))
        .expect("the charge step's workers");
    assert!(
        charge["sdks"][0]
            .as_str()
            .is_some_and(|s| s.starts_with("durable-rs ")),
        "the pool lists what its workers announced: {charge}"
    );
    assert!(
        charge["capabilities"]
            .as_array()
            .is_some_and(|c| c.iter().any(|c| c == "saga")),
        "{charge}"
    );
    let on_pool = cluster
        .transport
        .worker_descriptors("order.charge@acme.gpu")
        .await
        .expect("descriptors");
    assert_eq!(on_pool.len(), 1);
    assert_eq!(on_pool[0].partition.as_deref(), Some("acme.gpu"));
    let on_own = cluster
        .transport
        .worker_descriptors("order.charge@acme")
        .await
        .expect("descriptors");
    assert!(on_own.is_empty(), "{on_own:?}");
}

/// `durable worker --pool gpu`, with no tenant, serves the operator's shared pool `gpu`: granted
/// to acme and globex, whose rules send `demo.order` there, it runs both tenants' steps, each
/// from the tenant's own queue of the pool, and each tenant's pools list it live.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_pool_worker_serves_every_tenant_granted_the_pool() {
    let Some(cluster) = Cluster::start(&[]).await else {
        return;
    };
    let server = &cluster.control_plane;
    let client = reqwest::Client::new();
    let operator = server.operator_token();
    let created = client
        .put(server.url("/api/v1/shared-pools/gpu"))
        .bearer_auth(&operator)
        .json(&serde_json::json!({}))
        .send()
        .await
        .expect("put");
    assert_eq!(created.status(), reqwest::StatusCode::CREATED);
    let rules = serde_json::json!({"rules": [
        {"match": {"workflow": "demo.order"}, "pool": "gpu"},
        {"match": {}, "pool": "default"},
    ]});
    for tenant in ["acme", "globex"] {
        let granted = client
            .put(server.url(&format!("/api/v1/shared-pools/gpu/grants/{tenant}")))
            .bearer_auth(&operator)
            .send()
            .await
            .expect("grant");
        assert_eq!(granted.status(), reqwest::StatusCode::OK);
        let routed = client
            .put(server.url("/api/v1/routing"))
            .bearer_auth(server.token(tenant))
            .json(&rules)
            .send()
            .await
            .expect("rules");
        assert_eq!(routed.status(), reqwest::StatusCode::OK);
    }
    let _worker = WorkerProcess::start_as(&["--pool", "gpu"], &cluster.env);
    let mut runs = Vec::new();
    for tenant in ["acme", "globex"] {
        let token = server.token(tenant);
        let run = start_run(
            &client,
            server,
            &token,
            serde_json::json!({"workflow": "demo.order", "input": {"delay_ms": 0}}),
        )
        .await;
        runs.push((tenant, token, run["id"].as_str().expect("id").to_owned()));
    }
    for (tenant, token, id) in &runs {
        let mut detail = serde_json::Value::Null;
        for _ in 0..3 {
            detail = wait_status(&client, server, token, id, "completed").await;
            if detail["run"]["status"] == "completed" {
                break;
            }
        }
        assert_eq!(detail["run"]["status"], "completed", "{tenant}: {detail}");
        let charge = detail["checkpoints"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["name"] == "order.charge"))
            .cloned()
            .unwrap_or_default();
        assert_eq!(
            charge["worker_group"],
            format!("order.charge@{tenant}.gpu"),
            "{tenant}: {detail}"
        );
        let pool = get_json(&client, server, token, "/api/v1/pools/gpu").await;
        assert_eq!(pool["shared"], true, "{pool}");
        assert!(
            pool["workers"].as_array().is_some_and(|w| !w.is_empty()),
            "{tenant}'s pool lists the shared worker: {pool}"
        );
    }
}

/// `durable worker --tenant acme` given acme's wire token serves `durable.http` with acme's
/// connection, read from the control plane: the secret header reaches the downstream, and the
/// run's output keeps its echo redacted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_worker_with_its_wire_token_calls_through_its_tenants_connection() {
    use axum::http::HeaderMap;
    use std::sync::{Arc, Mutex};

    let received: Arc<Mutex<Vec<String>>> = Arc::default();
    let heard = received.clone();
    let downstream = axum::Router::new().route(
        "/v1/charges",
        axum::routing::post(move |headers: HeaderMap| {
            let auth = headers
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned();
            heard.lock().expect("lock").push(auth.clone());
            async move { axum::Json(json!({"id": "ch_1", "echo_auth": auth})) }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    tokio::spawn(async move { axum::serve(listener, downstream).await });

    let master_key: String = (0..4)
        .map(|_| format!("{:016x}", rand::random::<u64>()))
        .collect();
    let Some(cluster) = Cluster::start(&[("DURABLE_MASTER_KEY", master_key)]).await else {
        return;
    };
    let server = &cluster.control_plane;
    let client = reqwest::Client::new();
    let acme = server.token("acme");
    let secret = format!("sk_cluster_{:016x}", rand::random::<u64>());
    let saved = client
        .put(server.url("/api/v1/connections/api"))
        .bearer_auth(&acme)
        .json(&json!({
            "kind": "http",
            "base_url": format!("http://127.0.0.1:{port}/v1/"),
            "secret_headers": {"Authorization": format!("Bearer {secret}")},
        }))
        .send()
        .await
        .expect("put");
    assert_eq!(saved.status(), reqwest::StatusCode::CREATED);

    let mut env = cluster.env.clone();
    env.push(("DURABLE_WIRE_TOKEN", server.wire_token("acme")));
    env.push(("DURABLE_CONNECTION_ALLOW", "127.0.0.1".to_owned()));
    let _worker = WorkerProcess::start_as(&["--tenant", "acme"], &env);
    let run = start_run(
        &client,
        server,
        &acme,
        json!({
            "workflow": "demo.http",
            "input": {"connection": "api", "method": "POST", "path": "charges", "body": {"amount": 5}},
        }),
    )
    .await;
    let id = run["id"].as_str().expect("id");
    let detail = wait_status(&client, server, &acme, id, "completed").await;
    assert_eq!(detail["run"]["status"], "completed", "{detail}");
    assert_eq!(detail["run"]["output"]["status"], 200, "{detail}");
    assert_eq!(detail["run"]["output"]["body"]["echo_auth"], "[redacted]");
    assert_eq!(
        *received.lock().expect("lock"),
        [format!("Bearer {secret}")]
    );
    assert!(!detail.to_string().contains(&secret));
}
