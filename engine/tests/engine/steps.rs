//! Steps: remote and local steps, failures, retries with backoff, timeouts, and parallel
//! fan-outs whose racing results are each applied once.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use durable::StartRun;
use durable::model::{
    CheckpointKind, CheckpointStatus, Namespace, RunStatus, Scope, TenantEventKind,
};
use durable::prelude::*;
use durable::runtime::Clock;
use serde_json::{Value, json};

use crate::backend::Backend;
use crate::common::{skip_to_wake, wait_for};
use crate::events::{heard, kinds};
use crate::registries::order_registry;

engine_cases! {
    a_three_step_workflow_completes_with_checkpoints,
    local_steps_failures_and_unknown_versions,
    failed_steps_are_retried_with_backoff_until_their_policy_gives_up,
    a_step_try_that_outlives_its_timeout_is_retried_then_fails_for_good,
    [multi_thread] parallel_steps_dispatch_together_and_their_racing_results_are_each_applied_once,
}

async fn a_three_step_workflow_completes_with_checkpoints(backend: Backend) {
    let executions = Arc::new(AtomicU32::new(0));
    let h = backend.start(order_registry(executions.clone())).await;
    let mut events = h.events(Namespace::tenant("acme").unwrap()).await;
    let run = h
        .engine
        .start_run(StartRun {
            workflow: "sum3".into(),
            input: json!(10),
            namespace: Some(Namespace::tenant("acme").unwrap()),
            ..Default::default()
        })
        .await
        .expect("start");
    let done = wait_for(&h.store, &run.id, RunStatus::Completed).await;
    assert_eq!(done.output, Some(json!({"total": 13})));
    assert_eq!(done.namespace.as_str(), "acme");
    let cps = h.store.checkpoints(&Scope::All, &run.id).await.unwrap();
    assert_eq!(cps.len(), 3);
    assert!(
        cps.iter().all(
            |c| c.kind == CheckpointKind::RemoteStep && c.status == CheckpointStatus::Completed
        )
    );
    assert_eq!(
        cps[0].worker_group.as_deref(),
        Some("add@acme"),
        "steps route to the run's partition"
    );
    assert_eq!(executions.load(Ordering::SeqCst), 3, "each step ran once");
    // The run's tenant saw its lifecycle, ending with completion.
    let announced = heard(&mut events).await;
    assert!(
        announced.iter().all(|ev| ev.run_id == run.id),
        "{announced:?}"
    );
    let kinds = kinds(&announced);
    assert_eq!(kinds.first(), Some(&TenantEventKind::RunStarted));
    assert_eq!(kinds.last(), Some(&TenantEventKind::RunCompleted));
    // Each change once: the start is announced as its first turn (persisted with it) left the
    // run, suspended, and each result's turn moves it on from `suspended` in one write, never
    // `running` in the store.
    let count = |kind| kinds.iter().filter(|k| **k == kind).count();
    assert_eq!(count(TenantEventKind::StepCompleted), 3, "{kinds:?}");
    assert_eq!(count(TenantEventKind::RunSuspended), 0, "{kinds:?}");
    assert_eq!(count(TenantEventKind::RunRunning), 0, "{kinds:?}");
    assert_eq!(kinds.len(), 5, "{kinds:?}");
    h.stop().await;
}

async fn local_steps_failures_and_unknown_versions(backend: Backend) {
    let mut r = Registry::new();
    r.workflow("local", 1, |ctx: WorkflowContext, _: Value| async move {
        let v: u32 = ctx.local_step("compute", || async { Ok(41) }).await?;
        Ok::<_, WorkflowError>(v + 1)
    });
    r.workflow(
        "fails",
        1,
        |_ctx: WorkflowContext, input: Value| async move {
            if input["ok"] == json!(true) {
                Ok(json!("fine"))
            } else {
                Err(WorkflowError::msg("input.ok is not true"))
            }
        },
    );
    r.workflow("bad-input", 1, |_ctx: WorkflowContext, n: u32| async move {
        Ok::<_, WorkflowError>(n)
    });
    let h = backend.start(r).await;
    let local = h.start_run("local", json!(null)).await;
    let done = wait_for(&h.store, &local.id, RunStatus::Completed).await;
    assert_eq!(done.output, Some(json!(42)));
    let cps = h.store.checkpoints(&Scope::All, &local.id).await.unwrap();
    assert_eq!(cps.len(), 1);
    assert_eq!(cps[0].kind, CheckpointKind::LocalStep);
    let failed = h.start_run("fails", json!({})).await;
    let failed = wait_for(&h.store, &failed.id, RunStatus::Failed).await;
    assert_eq!(failed.error.unwrap().message, "input.ok is not true");
    let bad = h.start_run("bad-input", json!("x")).await;
    let bad = wait_for(&h.store, &bad.id, RunStatus::Failed).await;
    assert_eq!(bad.error.unwrap().code.as_deref(), Some("invalid_input"));
    let unknown = h
        .engine
        .start_run(StartRun {
            workflow: "nope".into(),
            input: json!(1),
            ..Default::default()
        })
        .await;
    assert!(
        unknown.is_err(),
        "starting an unregistered workflow is refused"
    );
    h.stop().await;
}

async fn failed_steps_are_retried_with_backoff_until_their_policy_gives_up(mut backend: Backend) {
    use durable::model::RetryPolicy;
    let clock = backend.test_clock();
    let tries = Arc::new(AtomicU32::new(0));
    let mut r = Registry::new();
    let t = tries.clone();
    // Fails its first two tries (retryably), then succeeds.
    r.step("flappy", move |ctx: StepContext, _: Value| {
        let n = t.fetch_add(1, Ordering::SeqCst) + 1;
        async move {
            assert_eq!(ctx.attempt, n, "each try carries its attempt number");
            if n < 3 {
                Err(StepError::retryable(format!("try {n} failed")))
            } else {
                Ok(json!(n))
            }
        }
    });
    r.step("always-down", |_ctx: StepContext, _: Value| async move {
        Err::<Value, _>(StepError::retryable("down"))
    });
    let quick = RetryPolicy {
        max_attempts: 3,
        initial_ms: 30,
        factor: 2.0,
        max_ms: 1000,
        jitter: 0.2,
    };
    let q = quick.clone();
    r.workflow("flappy-wf", 1, move |ctx: WorkflowContext, _: Value| {
        let q = q.clone();
        async move { Ok::<_, WorkflowError>(ctx.step_with::<_, Value>("flappy", &json!({}), q).await?) }
    });
    r.workflow("down-wf", 1, move |ctx: WorkflowContext, _: Value| {
        let q = quick.clone();
        async move {
            Ok::<_, WorkflowError>(
                ctx.step_with::<_, Value>("always-down", &json!({}), q)
                    .await?,
            )
        }
    });
    let h = backend.start(r).await;
    let ok = h.start_run("flappy-wf", json!({})).await;
    // Each failed try waits out its backoff (30 ms, then 60 ms, give or take a fifth) on the
    // clock before the next.
    let first = clock.now();
    let retried_at = skip_to_wake(&clock, &h.store, &ok.id).await;
    assert!(
        (first + 24..=first + 36).contains(&retried_at),
        "{retried_at}"
    );
    let again_at = skip_to_wake(&clock, &h.store, &ok.id).await;
    assert!(
        (retried_at + 48..=retried_at + 72).contains(&again_at),
        "{again_at}"
    );
    let done = wait_for(&h.store, &ok.id, RunStatus::Completed).await;
    assert_eq!(done.output, Some(json!(3)));
    let cp = &h.store.checkpoints(&Scope::All, &ok.id).await.unwrap()[0];
    assert_eq!((cp.status, cp.attempts), (CheckpointStatus::Completed, 3));
    assert_eq!(tries.load(Ordering::SeqCst), 3);

    let down = h.start_run("down-wf", json!({})).await;
    for _ in 0..2 {
        skip_to_wake(&clock, &h.store, &down.id).await;
    }
    let failed = wait_for(&h.store, &down.id, RunStatus::Failed).await;
    assert_eq!(failed.error.unwrap().message, "down");
    let cp = &h.store.checkpoints(&Scope::All, &down.id).await.unwrap()[0];
    assert_eq!(
        (cp.status, cp.attempts),
        (CheckpointStatus::Failed, 3),
        "three tries, then the failure is final"
    );
    h.stop().await;
}

async fn a_step_try_that_outlives_its_timeout_is_retried_then_fails_for_good(mut backend: Backend) {
    use durable::model::RetryPolicy;
    let clock = backend.test_clock();
    // Held tries run until the case ends, past any timeout the clock reaches meanwhile.
    let held = Arc::new(tokio::sync::Semaphore::new(0));
    let tries = Arc::new(AtomicU32::new(0));
    let mut r = Registry::new();
    let (t, h1) = (tries.clone(), held.clone());
    // The first try is held past the timeout; the second answers at once.
    r.step("sluggish", move |_ctx: StepContext, _: Value| {
        let n = t.fetch_add(1, Ordering::SeqCst) + 1;
        let held = h1.clone();
        async move {
            if n == 1 {
                let _ = held.acquire().await;
            }
            Ok::<_, StepError>(json!(n))
        }
    });
    let h2 = held.clone();
    r.step("hangs", move |_ctx: StepContext, _: Value| {
        let held = h2.clone();
        async move {
            let _ = held.acquire().await;
            Ok::<_, StepError>(json!("too late"))
        }
    });
    let options = StepOptions::default()
        .retry(RetryPolicy {
            max_attempts: 2,
            initial_ms: 10,
            factor: 1.0,
            max_ms: 10,
            jitter: 0.0,
        })
        .timeout(Duration::from_millis(150));
    let o = options.clone();
    r.workflow("sluggish-wf", 1, move |ctx: WorkflowContext, _: Value| {
        let o = o.clone();
        async move {
            Ok::<_, WorkflowError>(ctx.step_with::<_, Value>("sluggish", &json!({}), o).await?)
        }
    });
    r.workflow("hangs-wf", 1, move |ctx: WorkflowContext, _: Value| {
        let o = options.clone();
        async move { Ok::<_, WorkflowError>(ctx.step_with::<_, Value>("hangs", &json!({}), o).await?) }
    });
    let h = backend.start(r).await;
    let start_wf = |name: &str| StartRun {
        workflow: name.into(),
        input: json!({}),
        ..Default::default()
    };
    // The first try times out 150 ms after it was sent; the retry goes 10 ms later and answers.
    let ok = h.engine.start_run(start_wf("sluggish-wf")).await.unwrap();
    let sent = clock.now();
    assert_eq!(skip_to_wake(&clock, &h.store, &ok.id).await, sent + 150);
    assert_eq!(skip_to_wake(&clock, &h.store, &ok.id).await, sent + 160);
    let done = wait_for(&h.store, &ok.id, RunStatus::Completed).await;
    assert_eq!(done.output, Some(json!(2)), "the second try's answer wins");
    let cp = &h.store.checkpoints(&Scope::All, &ok.id).await.unwrap()[0];
    assert_eq!((cp.status, cp.attempts), (CheckpointStatus::Completed, 2));
    assert_eq!(
        cp.timeout_ms,
        Some(150),
        "the timeout is stored with the step"
    );

    // Every try hangs: the first times out, the retry goes after its backoff and times out too.
    let hung = h.engine.start_run(start_wf("hangs-wf")).await.unwrap();
    let sent = clock.now();
    assert_eq!(skip_to_wake(&clock, &h.store, &hung.id).await, sent + 150);
    assert_eq!(skip_to_wake(&clock, &h.store, &hung.id).await, sent + 160);
    assert_eq!(skip_to_wake(&clock, &h.store, &hung.id).await, sent + 310);
    let failed = wait_for(&h.store, &hung.id, RunStatus::Failed).await;
    assert_eq!(failed.error.unwrap().code.as_deref(), Some("timeout"));
    let cp = &h.store.checkpoints(&Scope::All, &hung.id).await.unwrap()[0];
    assert_eq!(
        (cp.status, cp.attempts),
        (CheckpointStatus::Failed, 2),
        "each try timed out, then the failure is final"
    );
    assert_eq!(tries.load(Ordering::SeqCst), 2);
    // The held tries end (their late results are dropped), so the worker can stop.
    held.close();
    h.stop().await;
}

async fn parallel_steps_dispatch_together_and_their_racing_results_are_each_applied_once(
    backend: Backend,
) {
    let executions = Arc::new(AtomicU32::new(0));
    let mut r = Registry::new();
    let ex = executions.clone();
    r.step("square", move |_ctx: StepContext, n: u64| {
        let ex = ex.clone();
        async move {
            ex.fetch_add(1, Ordering::SeqCst);
            // Results land in a different order than the steps were issued.
            tokio::time::sleep(Duration::from_millis((7 * n) % 5)).await;
            Ok::<_, StepError>(n * n)
        }
    });
    r.workflow("squares", 1, |ctx: WorkflowContext, n: u64| async move {
        let first = (1..=n).map(|i| {
            let ctx = ctx.clone();
            async move { ctx.step::<_, u64>("square", &i).await }
        });
        let squares = futures::future::try_join_all(first).await?;
        // A second fan-out after the join, so results also race a suspended run.
        let second = squares.iter().map(|s| {
            let ctx = ctx.clone();
            let s = *s;
            async move { ctx.step::<_, u64>("square", &(s % 7)).await }
        });
        let again = futures::future::try_join_all(second).await?;
        Ok::<_, WorkflowError>(json!({ "sum": squares.iter().sum::<u64>(), "again": again.len() }))
    });
    let h = backend.start(r).await;
    let mut ids = Vec::new();
    for _ in 0..40 {
        let run = h.start_run("squares", json!(5)).await;
        ids.push(run.id);
    }
    for id in &ids {
        let done = wait_for(&h.store, id, RunStatus::Completed).await;
        assert_eq!(done.output, Some(json!({ "sum": 55, "again": 5 })));
        let cps = h.store.checkpoints(&Scope::All, id).await.unwrap();
        assert_eq!(cps.len(), 10);
        assert!(
            cps.iter()
                .all(|c| c.status == CheckpointStatus::Completed && c.attempts == 1)
        );
        let first_wave: Vec<_> = cps[..5].iter().map(|c| c.enqueued_at).collect();
        assert!(
            first_wave.iter().all(|at| *at == first_wave[0]),
            "the five parallel steps are dispatched by one turn: {first_wave:?}"
        );
    }
    assert_eq!(
        executions.load(Ordering::SeqCst),
        40 * 10,
        "every step ran exactly once"
    );
    h.stop().await;
}
