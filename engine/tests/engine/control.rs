//! The operator's verbs: cancel (told to in-flight steps), retry, retry with input, redispatch
//! and continue, each inside its scope.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use durable::StartRun;
use durable::model::{Namespace, RunStatus, Scope};
use durable::prelude::*;
use durable::runtime::SystemClock;
use durable::transport::Transport;
use serde_json::{Value, json};

use crate::backend::Backend;
use crate::common::wait_for;
use crate::registries::{order_registry, signal_registry};

engine_cases! {
    cancel_retry_and_retry_with_input_follow_the_rules,
    cancelling_a_run_tells_its_in_flight_steps_on_the_control_channel,
    redispatch_resends_waiting_steps_and_continue_retries_a_blocked_run,
}

async fn cancel_retry_and_retry_with_input_follow_the_rules(mut backend: Backend) {
    use durable::Control;
    use std::sync::atomic::AtomicBool;
    let clock = backend.test_clock();
    let healthy = Arc::new(AtomicBool::new(false));
    let mut r = signal_registry();
    let h2 = healthy.clone();
    r.step("shaky", move |_ctx: StepContext, _: Value| {
        let ok = h2.load(Ordering::SeqCst);
        async move {
            if ok {
                Ok(json!("fine"))
            } else {
                Err(StepError::fatal("not yet"))
            }
        }
    });
    r.workflow(
        "uses-shaky",
        1,
        |ctx: WorkflowContext, input: Value| async move {
            let first: Value = ctx.local_step("before", || async { Ok(json!(1)) }).await?;
            let out: Value = ctx.step("shaky", &input).await?;
            Ok::<_, WorkflowError>(json!([first, out]))
        },
    );
    let h = backend.start(r).await;
    let acme = Namespace::tenant("acme").unwrap();
    let globex = Scope::Only(Namespace::tenant("globex").unwrap());

    // Cancel: a waiting run is cancelled; another tenant cannot; a finished run stays finished.
    let start_late = || StartRun {
        workflow: "approve-late".into(),
        input: json!({}),
        namespace: Some(acme.clone()),
        ..Default::default()
    };
    let waiting = h.engine.start_run(start_late()).await.unwrap();
    wait_for(&h.store, &waiting.id, RunStatus::Suspended).await;
    assert!(matches!(
        h.engine.cancel(&globex, &waiting.id).await.unwrap(),
        Control::NotFound
    ));
    let cancelled = h
        .engine
        .cancel(&Scope::Only(acme.clone()), &waiting.id)
        .await
        .unwrap();
    assert!(
        matches!(&cancelled, Control::Done(run) if run.status == RunStatus::Cancelled),
        "{cancelled:?}"
    );
    assert!(matches!(
        h.engine.cancel(&Scope::All, &waiting.id).await.unwrap(),
        Control::WrongStatus(_)
    ));
    // Its timer comes due. A run asleep as long beside it, its signals sent, completes once the
    // engine has acted on the timers due then; the cancelled one was never turned again.
    let beside = h.engine.start_run(start_late()).await.unwrap();
    for n in [1, 2] {
        h.engine
            .signal(&Scope::All, &beside.id, "approve", json!(n))
            .await
            .unwrap();
    }
    clock.advance(Duration::from_millis(250));
    wait_for(&h.store, &beside.id, RunStatus::Completed).await;
    assert_eq!(
        h.store
            .get_run(&Scope::All, &waiting.id)
            .await
            .unwrap()
            .unwrap()
            .status,
        RunStatus::Cancelled,
        "a stale turn never resurrects it"
    );

    // Retry: a failed run is re-driven from its last good checkpoint.
    let run = h
        .engine
        .start_run(StartRun {
            workflow: "uses-shaky".into(),
            input: json!({}),
            namespace: Some(acme.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    wait_for(&h.store, &run.id, RunStatus::Failed).await;
    let before = h.store.checkpoints(&Scope::All, &run.id).await.unwrap();
    assert!(matches!(
        h.engine.retry(&globex, &run.id).await.unwrap(),
        Control::NotFound
    ));
    healthy.store(true, Ordering::SeqCst);
    assert!(matches!(
        h.engine
            .retry(&Scope::Only(acme.clone()), &run.id)
            .await
            .unwrap(),
        Control::Done(_)
    ));
    let done = wait_for(&h.store, &run.id, RunStatus::Completed).await;
    assert_eq!(done.output, Some(json!([1, "fine"])));
    let after = h.store.checkpoints(&Scope::All, &run.id).await.unwrap();
    assert_eq!(
        after[0], before[0],
        "the good checkpoint was kept, not re-run"
    );
    assert!(
        matches!(
            h.engine.retry(&Scope::All, &run.id).await.unwrap(),
            Control::WrongStatus(_)
        ),
        "a completed run is not retried"
    );

    // Retry with input, by an operator: the new run keeps the original's namespace and links back.
    let Control::Done(new) = h
        .engine
        .retry_with_input(&Scope::All, &run.id, json!({"edited": true}))
        .await
        .unwrap()
    else {
        panic!("retry with input is done");
    };
    assert_eq!(new.namespace, acme);
    assert_eq!(new.retry_of.as_ref(), Some(&run.id));
    assert_eq!(new.input, json!({"edited": true}));
    wait_for(&h.store, &new.id, RunStatus::Completed).await;
    assert_eq!(
        h.store
            .get_run(&Scope::All, &run.id)
            .await
            .unwrap()
            .unwrap(),
        done,
        "the original is untouched"
    );
    assert!(matches!(
        h.engine
            .retry_with_input(&globex, &run.id, json!({}))
            .await
            .unwrap(),
        Control::NotFound
    ));
    h.stop().await;
}

async fn cancelling_a_run_tells_its_in_flight_steps_on_the_control_channel(backend: Backend) {
    let started = Arc::new(tokio::sync::Notify::new());
    let (told_tx, told_rx) = tokio::sync::oneshot::channel::<bool>();
    let told_tx = Arc::new(std::sync::Mutex::new(Some(told_tx)));
    let mut r = Registry::new();
    let s = started.clone();
    r.step("long", move |ctx: StepContext, _: Value| {
        let (s, told) = (s.clone(), told_tx.clone());
        async move {
            s.notify_one();
            let heard = tokio::time::timeout(Duration::from_secs(10), ctx.cancelled())
                .await
                .is_ok();
            if let Some(tx) = told.lock().unwrap().take() {
                let _ = tx.send(heard && ctx.is_cancelled());
            }
            Ok::<_, StepError>(json!("stopped early"))
        }
    });
    r.workflow("long-wf", 1, |ctx: WorkflowContext, _: Value| async move {
        Ok::<_, WorkflowError>(ctx.step::<_, Value>("long", &json!({})).await?)
    });
    let h = backend.start(r).await;
    let run = h.start_run("long-wf", json!({})).await;
    tokio::time::timeout(Duration::from_secs(5), started.notified())
        .await
        .expect("the step starts");
    h.engine.cancel(&Scope::All, &run.id).await.unwrap();
    let heard = tokio::time::timeout(Duration::from_secs(5), told_rx)
        .await
        .expect("the handler hears of the cancel")
        .expect("answer");
    assert!(heard, "the step saw its run cancelled");
    let cancelled = wait_for(&h.store, &run.id, RunStatus::Cancelled).await;
    assert_eq!(cancelled.output, None, "the late result is dropped");
    h.stop().await;
}

async fn redispatch_resends_waiting_steps_and_continue_retries_a_blocked_run(backend: Backend) {
    use durable::Control;
    use durable::runtime::Clock;

    let store = backend.store().await;
    let executions = Arc::new(AtomicU32::new(0));
    let transport: Arc<dyn Transport> = backend.transport().await;
    let registry = Arc::new(order_registry(executions.clone()));
    let engine = Engine::new(
        store.clone(),
        transport.clone(),
        registry.clone(),
        EngineConfig::default(),
    );
    engine.start().await.expect("engine starts");
    let acme = Namespace::parse("acme").expect("ns");
    let run = engine
        .start_run(StartRun {
            workflow: "sum3".into(),
            input: json!(5),
            namespace: Some(acme.clone()),
            ..Default::default()
        })
        .await
        .expect("start");
    wait_for(&store, &run.id, RunStatus::Suspended).await;
    assert!(
        transport
            .worker_groups(&Scope::All)
            .await
            .expect("groups")
            .is_empty(),
        "no worker is connected yet"
    );

    // Another tenant cannot redispatch it; its own scope can, and the step goes out again.
    let globex = Scope::Only(Namespace::parse("globex").expect("ns"));
    let (outcome, _) = engine
        .redispatch(&globex, &run.id)
        .await
        .expect("redispatch");
    assert!(matches!(outcome, Control::NotFound));
    let (outcome, steps) = engine
        .redispatch(&Scope::Only(acme.clone()), &run.id)
        .await
        .expect("redispatch");
    assert!(matches!(outcome, Control::Done(_)));
    assert_eq!(steps, 1);

    // A worker arrives: the queued copy of step 0 was replaced by the redispatch, so it runs
    // each step once.
    let worker = backend.worker(registry, transport.clone()).await;
    let groups = transport
        .worker_groups(&Scope::Only(acme.clone()))
        .await
        .expect("groups");
    // One worker serves `add` on acme: `add@*` in-process (every partition), `add@acme` on a
    // shared broker (the tenants named).
    let add: Vec<_> = groups
        .iter()
        .filter(|g| g.serves("add", &acme.clone().into()))
        .collect();
    assert_eq!(add.len(), 1, "{groups:?}");
    assert_eq!(add[0].workers, 1);
    let done = wait_for(&store, &run.id, RunStatus::Completed).await;
    assert_eq!(done.output, Some(json!({"total": 8})));
    assert_eq!(executions.load(Ordering::SeqCst), 3);
    let (outcome, steps) = engine
        .redispatch(&Scope::All, &run.id)
        .await
        .expect("redispatch");
    assert!(
        matches!(outcome, Control::WrongStatus(_)) && steps == 0,
        "a finished run has nothing to redispatch"
    );

    // A run on a version nobody serves parks as blocked; continue drives it again, and it
    // parks again with the reason because the cause remains.
    let mut pinned = durable::store::NewRun::top_level(
        durable::model::RunId::generate(),
        acme.clone(),
        "sum3",
        9,
        json!(1),
    );
    pinned.tags = vec!["pinned".into()];
    let pinned = store
        .create_run(pinned, SystemClock.now(), None)
        .await
        .expect("create");
    let blocked = wait_for(&store, &pinned.id, RunStatus::Blocked).await;
    let before = blocked.updated_at;
    assert!(matches!(
        engine
            .continue_run(&globex, &pinned.id)
            .await
            .expect("continue"),
        Control::NotFound
    ));
    assert!(matches!(
        engine
            .continue_run(&Scope::Only(acme.clone()), &pinned.id)
            .await
            .expect("continue"),
        Control::Done(ref r) if r.status == RunStatus::Pending
    ));
    let reblocked = wait_for(&store, &pinned.id, RunStatus::Blocked).await;
    assert!(reblocked.updated_at >= before);
    assert!(matches!(
        engine
            .continue_run(&Scope::All, &run.id)
            .await
            .expect("continue"),
        Control::WrongStatus(_)
    ));
    worker.shutdown().await;
    engine.shutdown().await;
}
