//! The unmodified Python `durable-worker` beside our control plane: its steps, its starts, its
//! workflows.

use std::sync::Arc;
use std::time::Duration;

use durable::StartRun;
use durable::gateway::{RunRequestResponder, TokenSigner};
use durable::model::{RunId, RunStatus, Scope};
use durable::prelude::*;
use durable::transport::redis_testing::{fresh_transport, python, test_url};
use durable::transport::{RedisConfig, RedisTransport, StepQueues, WorkerRegistry, naming};
use serde_json::{Value, json};

use crate::common::wait_for;
use crate::harness::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_worker_serves_a_step_of_a_rust_workflow() {
    let Some((transport, _, mut python_worker)) = python_on_a_fresh_prefix().await else {
        return;
    };
    let mut registry = invoicing();
    // The same step, requiring what the run names: the guard reads the Python worker's
    // descriptor (the v1 baseline, which has `saga` and lacks `search-attr-v2`).
    registry.workflow(
        "interop.invoice-requiring",
        1,
        |ctx: WorkflowContext, (capability, input): (String, Value)| async move {
            let options = StepOptions::default().requires([capability]);
            let invoice: Value = ctx.step_with("billing.invoice", &input, options).await?;
            Ok::<_, WorkflowError>(json!({ "invoice": invoice }))
        },
    );
    let (_dir, store, engine) = control_plane_on_sqlite(&transport, Arc::new(registry)).await;
    let start = |input: Value| StartRun {
        workflow: "interop.invoice".into(),
        input,
        namespace: Some(ns("acme")),
        ..StartRun::default()
    };

    let ok = engine
        .start_run(start(json!({ "orderId": 42, "amount": 120 })))
        .await
        .expect("start");
    let done = wait_for(&store, &ok.id, RunStatus::Completed).await;
    assert_eq!(
        done.output,
        Some(json!({ "invoice": { "invoiceId": "inv_42", "amount": 120 } }))
    );

    // A Python FatalError arrives with its code and is not retried.
    let declined = engine
        .start_run(start(json!({ "orderId": 7, "decline": true })))
        .await
        .expect("start");
    let failed = wait_for(&store, &declined.id, RunStatus::Failed).await;
    let error = failed.error.expect("an error");
    assert!(error.message.contains("card declined"), "{error:?}");
    let checkpoints = store
        .checkpoints(&Scope::All, &declined.id)
        .await
        .expect("checkpoints");
    assert_eq!(checkpoints[0].attempts, 1);

    // The Python worker announced itself on the wire's registry keys.
    let groups = transport
        .worker_groups(&Scope::Only(ns("acme")))
        .await
        .expect("groups");
    assert!(
        groups
            .iter()
            .any(|g| g.token() == "billing.invoice@acme" && g.workers == 1),
        "{groups:?}"
    );

    // The dispatch guard negotiates against the Python worker's own descriptor.
    let requiring = |capability: &str| StartRun {
        workflow: "interop.invoice-requiring".into(),
        input: json!([capability, { "orderId": 9, "amount": 5 }]),
        namespace: Some(ns("acme")),
        ..StartRun::default()
    };
    let has = engine.start_run(requiring("saga")).await.expect("start");
    let done = wait_for(&store, &has.id, RunStatus::Completed).await;
    assert_eq!(
        done.output,
        Some(json!({ "invoice": { "invoiceId": "inv_9", "amount": 5 } }))
    );
    let lacks = engine
        .start_run(requiring("search-attr-v2"))
        .await
        .expect("start");
    let parked = wait_for(&store, &lacks.id, RunStatus::Blocked).await;
    let reason = parked.error.expect("a reason");
    assert_eq!(
        reason.message,
        "blocked: no compatible worker (requires search-attr-v2)"
    );
    assert_eq!(reason.code.as_deref(), Some("capability.unavailable"));
    assert!(
        store
            .checkpoints(&Scope::All, &lacks.id)
            .await
            .expect("checkpoints")
            .is_empty(),
        "the step was not queued for a worker that cannot take it"
    );
    engine.shutdown().await;
    python_worker.kill().await.expect("stop the Python worker");
}

/// A Python worker SIGKILLed while it runs a step: the step's job goes back to its queue as
/// soon as the worker's liveness lapses, put back by our control plane rather than by the
/// SDK's stalled check a minute later, as the same job (one job per try), and the surviving
/// worker runs it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_python_workers_step_goes_back_once_its_liveness_lapses() {
    let Some(transport) = fresh_transport().await else {
        return;
    };
    let Some(python) = python() else {
        return;
    };
    let partition = ("DURABLE_PARTITION", "acme");
    let mut holder = python_worker_on(
        &python,
        transport.prefix(),
        &[partition, ("DURABLE_HOLD", "1")],
    )
    .await;
    let mut registry = Registry::new();
    registry.workflow(
        "interop.hold",
        1,
        |ctx: WorkflowContext, _: Value| async move {
            let held: Value = ctx.step("billing.hold", &json!({})).await?;
            Ok::<_, WorkflowError>(held)
        },
    );
    let (_dir, store, engine) = control_plane_on_sqlite(&transport, Arc::new(registry)).await;
    let run = engine
        .start_run(StartRun {
            workflow: "interop.hold".into(),
            input: json!({}),
            namespace: Some(ns("acme")),
            ..StartRun::default()
        })
        .await
        .expect("start");
    let queue = naming::tasks_queue(transport.prefix(), "billing.hold@acme");
    let mut redis = raw_redis().await;
    let active = naming::bull_key(&queue, "active");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let running: i64 = redis::cmd("LLEN")
            .arg(&active)
            .query_async(&mut redis)
            .await
            .expect("llen");
        if running == 1 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the holder never took the step"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let survivor = python_worker_on(&python, transport.prefix(), &[partition]).await;
    let survivor_pid = survivor.id().expect("pid");
    holder.kill().await.expect("SIGKILL the holder");
    let killed = std::time::Instant::now();
    let done = crate::common::wait_until(&store, &run.id, Duration::from_secs(90), |r| {
        r.status == RunStatus::Completed
    })
    .await;
    eprintln!(
        "the killed worker's step completed on the survivor {:.1} s after the kill",
        killed.elapsed().as_secs_f64()
    );
    assert_eq!(done.output, Some(json!({ "heldBy": survivor_pid })));
    // Put back by the control plane, once, and never added a second time.
    let events: Vec<redis::Value> = redis::cmd("XRANGE")
        .arg(naming::bull_key(&queue, "events"))
        .arg("-")
        .arg("+")
        .query_async(&mut redis)
        .await
        .expect("events");
    let text = format!("{events:?}");
    assert_eq!(
        text.matches("its worker stopped beating").count(),
        1,
        "put back once, by the control plane: {text}"
    );
    assert_eq!(text.matches("\"added\"").count(), 1, "one job: {text}");
    engine.shutdown().await;
    drop(survivor);
}

/// A control plane started with a namespace keeps every name under `P-<namespace>` and spells
/// its own tokens bare there, as the SDKs do: the unmodified Python `Worker(namespace="blue")`
/// serves its step, and nothing reaches the shared prefix.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespaced_python_worker_serves_a_namespaced_control_plane() {
    let Some(shared) = fresh_transport().await else {
        return;
    };
    let Some(python) = python() else {
        return;
    };
    let blue = ns("blue");
    let transport = RedisTransport::connect(RedisConfig {
        prefix: shared.prefix().to_owned(),
        namespace: Some(blue.clone()),
        ..RedisConfig::new(test_url())
    })
    .await
    .expect("redis");
    assert_eq!(transport.prefix(), format!("{}-blue", shared.prefix()));
    let tenancy = [("DURABLE_PARTITION", ""), ("DURABLE_NAMESPACE", "blue")];
    let mut python_worker = python_worker_on(&python, shared.prefix(), &tenancy).await;
    let dir = tempfile::tempdir().expect("tmp");
    let store = sqlite(&dir).await;
    let registry = invoicing();
    let engine = Engine::new(
        store.clone(),
        Arc::new(transport.clone()),
        Arc::new(registry),
        EngineConfig {
            namespace: Some(blue.clone()),
            ..EngineConfig::default()
        },
    );
    engine.start().await.expect("engine");

    let run = engine
        .start_run(StartRun {
            workflow: "interop.invoice".into(),
            input: json!({ "orderId": 5, "amount": 30 }),
            ..StartRun::default()
        })
        .await
        .expect("start");
    assert_eq!(run.namespace, blue);
    let done = wait_for(&store, &run.id, RunStatus::Completed).await;
    assert_eq!(
        done.output,
        Some(json!({ "invoice": { "invoiceId": "inv_5", "amount": 30 } }))
    );
    let checkpoints = store
        .checkpoints(&Scope::All, &run.id)
        .await
        .expect("checkpoints");
    assert_eq!(
        checkpoints[0].worker_group.as_deref(),
        Some("billing.invoice@blue"),
        "the engine names the token as ever; only the wire leaves the namespace out"
    );

    // The Python worker announced the bare token under the namespaced prefix, which reads back
    // as blue's; the shared prefix heard of no worker at all.
    let mut redis = raw_redis().await;
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{}-worker-heartbeat:*", transport.prefix()))
        .query_async(&mut redis)
        .await
        .expect("keys");
    assert!(
        keys.iter().any(|k| k.starts_with(&format!(
            "{}-worker-heartbeat:billing.invoice:py-",
            transport.prefix()
        ))),
        "{keys:?}"
    );
    let groups = transport
        .worker_groups(&Scope::Only(blue.clone()))
        .await
        .expect("groups");
    assert!(
        groups
            .iter()
            .any(|g| g.token() == "billing.invoice@blue" && g.workers == 1),
        "{groups:?}"
    );
    assert_eq!(
        shared.worker_groups(&Scope::All).await.expect("groups"),
        Vec::new()
    );
    // The directory is re-read every few seconds: an earlier read may predate the worker's
    // first announcement.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let descriptors = loop {
        let descriptors = transport
            .worker_descriptors("billing.invoice@blue")
            .await
            .expect("descriptors");
        if !descriptors.is_empty() || std::time::Instant::now() > deadline {
            break descriptors;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(descriptors.len(), 1, "{descriptors:?}");
    assert_eq!(descriptors[0].namespace.as_deref(), Some("blue"));

    // Another tenant's token cannot be routed under blue's prefix.
    let refused = transport
        .dispatch(durable::model::RemoteTask {
            run_id: run.id.clone(),
            seq: 9,
            name: "billing.invoice".into(),
            step_id: durable::model::step_id(&run.id, 9),
            group: "billing.invoice@acme".into(),
            input: None,
            context: None,
            traceparent: None,
            attempt: 1,
            reply_to: None,
            priority: None,
            receipt: Default::default(),
        })
        .await
        .expect_err("refused");
    assert!(
        refused.to_string().contains("namespace `blue` only"),
        "{refused}"
    );
    engine.shutdown().await;
    python_worker.kill().await.expect("stop the Python worker");
}

/// A store-less Python tenant starts a run through the SDK's `start_run` (a start-run message):
/// our responder starts it in the tenant of the signed token it carries, and refuses a message
/// whose token is not signed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_start_run_starts_a_run_in_its_tokens_tenant() {
    let Some((transport, python, mut python_worker)) = python_on_a_fresh_prefix().await else {
        return;
    };
    let (_dir, store, engine) =
        control_plane_on_sqlite(&transport, Arc::new(Registry::new())).await;
    let signer = TokenSigner::new(vec![9u8; 32]).expect("signer");
    tokio::spawn(RunRequestResponder::new(engine.clone(), signer.clone()).serve());

    // The plain partition name, as a Python worker sends it unless given a token: refused.
    python_start_run(&python, transport.prefix(), "acme", "run-py-forged").await;
    let token = signer.sign(&ns("acme"));
    python_start_run(&python, transport.prefix(), &token, "run-py-1").await;
    let id = RunId::parse("run-py-1").expect("id");
    crate::common::wait_for_signal_wait(&store, &id).await;
    let run = store
        .get_run(&Scope::All, &id)
        .await
        .expect("get")
        .expect("started");
    assert_eq!(run.namespace, ns("acme"));
    assert_eq!(run.tags, ["from-python"]);
    let forged = RunId::parse("run-py-forged").expect("id");
    assert!(
        store
            .get_run(&Scope::All, &forged)
            .await
            .expect("get")
            .is_none(),
        "an unsigned start-run message started nothing"
    );
    engine
        .signal(&Scope::Only(ns("acme")), &id, "approve", json!("ok"))
        .await
        .expect("signal");
    let done = wait_for(&store, &id, RunStatus::Completed).await;
    assert_eq!(done.output.expect("output")["approval"], json!("ok"));
    engine.shutdown().await;
    python_worker.kill().await.expect("stop the Python worker");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_control_plane_drives_a_python_workflow_to_completion() {
    let Some((transport, _, mut python_worker)) = python_on_a_fresh_prefix().await else {
        return;
    };
    // Nothing registered here: every turn of these workflows runs on the Python worker.
    let (_dir, store, engine) =
        control_plane_on_sqlite(&transport, Arc::new(Registry::new())).await;
    let acme = ns("acme");
    let run = engine
        .start_run(StartRun {
            workflow: "billing.close-month".into(),
            input: json!({ "orderId": 9, "amount": 50, "graceMs": 200 }),
            namespace: Some(acme.clone()),
            ..StartRun::default()
        })
        .await
        .expect("a workflow a live worker announces can be started");

    // The clock read, the step (served by the Python step worker) and the timer pass; then the
    // run waits for its signal.
    crate::common::wait_for_signal_wait(&store, &run.id).await;
    engine
        .signal(
            &Scope::Only(acme.clone()),
            &run.id,
            "approve",
            json!({ "by": "ops" }),
        )
        .await
        .expect("signal");
    let done = wait_for(&store, &run.id, RunStatus::Completed).await;
    let output = done.output.expect("output");
    assert_eq!(
        output["invoice"],
        json!({ "invoiceId": "inv_9", "amount": 50 })
    );
    assert_eq!(output["approval"], json!({ "by": "ops" }));
    assert_eq!(output["receipt"], json!({ "receiptFor": "inv_9" }));
    assert!(output["startedAt"].is_number());
    // A signal sent before the workflow waits for it is buffered, and the wait takes it when
    // the worker reaches it.
    let early = engine
        .start_run(StartRun {
            workflow: "billing.close-month".into(),
            input: json!({ "orderId": 10, "amount": 5, "graceMs": 300 }),
            namespace: Some(acme.clone()),
            ..StartRun::default()
        })
        .await
        .expect("start");
    engine
        .signal(
            &Scope::Only(acme.clone()),
            &early.id,
            "approve",
            json!("early"),
        )
        .await
        .expect("signal");
    let done_early = wait_for(&store, &early.id, RunStatus::Completed).await;
    assert_eq!(
        done_early.output.expect("output")["approval"],
        json!("early")
    );
    let child = store
        .get_run(&Scope::All, &durable::runtime::child_run_id(&run.id, 4))
        .await
        .expect("get")
        .expect("the child run");
    assert_eq!(
        child.namespace, acme,
        "the child is stamped with the parent's namespace"
    );
    assert_eq!(child.status, RunStatus::Completed);
    // The worker reported its local steps (the clock read) as step events, and the control
    // plane took every one off the queue.
    let mut redis = raw_redis().await;
    let queue = format!("bull:{}-step-events", transport.prefix());
    let sent: Option<i64> = redis::cmd("GET")
        .arg(format!("{queue}:id"))
        .query_async(&mut redis)
        .await
        .expect("GET");
    assert!(sent.unwrap_or(0) > 0, "the Python worker sent step events");
    let waiting: i64 = redis::cmd("LLEN")
        .arg(format!("{queue}:wait"))
        .query_async(&mut redis)
        .await
        .expect("LLEN");
    assert_eq!(waiting, 0, "every step event was consumed");
    engine.shutdown().await;
    python_worker.kill().await.expect("stop the Python worker");
}

/// A Python workflow's `call.group` (wire §3.5): its run's partition or `default` routes the
/// step to the run's tenant as ever; any other partition fails that step at once, and nothing
/// reaches the other tenant's queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_calls_partition_is_its_runs_or_the_step_is_refused() {
    let Some((transport, _, mut python_worker)) = python_on_a_fresh_prefix().await else {
        return;
    };
    let (_dir, store, engine) =
        control_plane_on_sqlite(&transport, Arc::new(Registry::new())).await;
    let acme = ns("acme");
    let mut outputs = Vec::new();
    for group in ["acme", "default", "globex"] {
        let run = engine
            .start_run(StartRun {
                workflow: "billing.routed".into(),
                input: json!({ "group": group }),
                namespace: Some(acme.clone()),
                ..StartRun::default()
            })
            .await
            .expect("start");
        let done = wait_for(&store, &run.id, RunStatus::Completed).await;
        outputs.push(done.output.expect("output"));
    }
    assert_eq!(outputs[0]["invoice"]["invoiceId"], "inv_1", "{outputs:?}");
    assert_eq!(outputs[1]["invoice"]["invoiceId"], "inv_1");
    let refused = outputs[2]["refused"].as_str().expect("refused");
    assert!(refused.contains("partition `globex`"), "{refused}");
    let mut redis = raw_redis().await;
    let globex_queue = format!(
        "bull:{}-tasks-billing.invoice@globex:id",
        transport.prefix()
    );
    let sent: Option<i64> = redis::cmd("GET")
        .arg(&globex_queue)
        .query_async(&mut redis)
        .await
        .expect("GET");
    assert_eq!(sent, None, "nothing was ever added to globex's queue");
    engine.shutdown().await;
    python_worker.kill().await.expect("stop the Python worker");
}
