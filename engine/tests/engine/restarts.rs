//! Processes that stop and start again: completed steps are not repeated, lost dispatches are
//! sent again, timers due meanwhile fire once, and a run another process held is recovered.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use durable::StartRun;
use durable::model::{CheckpointKind, CheckpointStatus, Namespace, RunStatus, Scope};
use durable::prelude::*;
use durable::transport::Transport;
use serde_json::{Value, json};

use crate::backend::Backend;
use crate::common::wait_for;
use crate::registries::order_registry;

engine_cases! {
    a_restart_does_not_repeat_completed_steps,
    steps_dispatched_before_a_crash_are_redispatched_on_restart,
    a_timer_that_comes_due_while_the_process_is_down_fires_once_on_restart,
    a_child_of_a_parent_recovered_by_an_operator_keeps_the_parents_namespace,
}

async fn a_restart_does_not_repeat_completed_steps(backend: Backend) {
    let executions = Arc::new(AtomicU32::new(0));
    // First life: the worker only serves nothing, so the run stops after dispatching step 0.
    let store = backend.store().await;
    let mut r = order_registry(executions.clone());
    let h = backend
        .start_on(store.clone(), std::mem::take(&mut r))
        .await;
    let run = h.start_run("sum3", json!(1)).await;
    let done = wait_for(&store, &run.id, RunStatus::Completed).await;
    assert_eq!(done.output, Some(json!({"total": 4})));
    h.stop().await;
    assert_eq!(executions.load(Ordering::SeqCst), 3);
    // Second life over the same store: replaying the finished history executes nothing.
    let h = backend.start(order_registry(executions.clone())).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        executions.load(Ordering::SeqCst),
        3,
        "no completed step runs again"
    );
    h.stop().await;
}

async fn steps_dispatched_before_a_crash_are_redispatched_on_restart(backend: Backend) {
    let executions = Arc::new(AtomicU32::new(0));
    // First life has no worker at all: step 0 is persisted and dispatched into the void.
    let store = backend.store().await;
    let transport: Arc<dyn Transport> = backend.transport().await;
    let engine = Engine::new(
        store.clone(),
        transport,
        Arc::new(order_registry(executions.clone())),
        EngineConfig::default(),
    );
    engine.start().await.unwrap();
    let run = engine
        .start_run(StartRun {
            workflow: "sum3".into(),
            input: json!(5),
            ..Default::default()
        })
        .await
        .unwrap();
    wait_for(&store, &run.id, RunStatus::Suspended).await;
    engine.shutdown().await;
    assert_eq!(executions.load(Ordering::SeqCst), 0);
    // Second life: an in-process queue is gone with the first, so the engine sends the step
    // again (a Redis queue still holds it); either way each step runs once.
    let h = backend.start(order_registry(executions.clone())).await;
    let done = wait_for(&h.store, &run.id, RunStatus::Completed).await;
    assert_eq!(done.output, Some(json!({"total": 8})));
    assert_eq!(executions.load(Ordering::SeqCst), 3);
    h.stop().await;
}

async fn a_timer_that_comes_due_while_the_process_is_down_fires_once_on_restart(
    mut backend: Backend,
) {
    let clock = backend.test_clock();
    let registry = || {
        let mut r = Registry::new();
        r.workflow("nap", 1, |ctx: WorkflowContext, ms: u64| async move {
            let before = ctx.now().await;
            ctx.sleep(Duration::from_millis(ms)).await;
            let after = ctx.now().await;
            let token: String = ctx.side_effect(uuid_like).await?;
            Ok::<_, WorkflowError>(json!({ "before": before, "after": after, "token": token }))
        });
        r
    };
    let h = backend.start(registry()).await;
    let run = h.start_run("nap", json!(300)).await;
    let suspended = wait_for(&h.store, &run.id, RunStatus::Suspended).await;
    let due = suspended.wake_at.expect("a sleeping run has a wake time");
    h.stop().await;
    // The process is down while the timer comes due.
    clock.advance(Duration::from_millis(400));
    let h = backend.start(registry()).await;
    let done = wait_for(&h.store, &run.id, RunStatus::Completed).await;
    let out = done.output.unwrap();
    let cps = h.store.checkpoints(&Scope::All, &run.id).await.unwrap();
    let kinds: Vec<_> = cps
        .iter()
        .map(|c| (c.kind, c.name.as_str(), c.status))
        .collect();
    assert_eq!(
        kinds,
        vec![
            (
                CheckpointKind::SideEffect,
                "now#0",
                CheckpointStatus::Completed
            ),
            (
                CheckpointKind::Sleep,
                "sleep:1",
                CheckpointStatus::Completed
            ),
            (
                CheckpointKind::SideEffect,
                "now#2",
                CheckpointStatus::Completed
            ),
            (
                CheckpointKind::SideEffect,
                "sideEffect",
                CheckpointStatus::Completed
            ),
        ]
    );
    // Values captured before the restart replay unchanged.
    assert_eq!(out["before"], cps[0].output.clone().unwrap());
    assert_eq!(out["token"], cps[3].output.clone().unwrap());
    assert_eq!(cps[1].wake_at, Some(due));
    let before = out["before"].as_i64().unwrap();
    assert_eq!(due, before + 300);
    assert_eq!(
        out["after"].as_i64().unwrap(),
        before + 400,
        "the run resumed at the restart, after its timer: {out}"
    );
    h.stop().await;
}

fn uuid_like() -> String {
    uuid::Uuid::new_v4().to_string()
}

async fn a_child_of_a_parent_recovered_by_an_operator_keeps_the_parents_namespace(
    mut backend: Backend,
) {
    use durable::model::RunId;
    use durable::runtime::Clock;
    use durable::store::{Claim, NewRun};
    let clock = backend.test_clock();
    let store = backend.store().await;
    // A tenant engine claimed the parent and died: its lease runs out in 100 ms.
    let now = clock.now();
    let acme = Namespace::tenant("acme").unwrap();
    let parent = store
        .create_run(
            NewRun::top_level(
                RunId::parse("parent-1").unwrap(),
                acme.clone(),
                "parent",
                1,
                json!(null),
            ),
            now,
            Some(&Claim {
                scope: Scope::Only(acme.clone()),
                owner: "crashed-acme-engine".into(),
                until: now + 100,
            }),
        )
        .await
        .unwrap();
    assert_eq!(parent.status, RunStatus::Running);
    let mut r = Registry::new();
    r.workflow("parent", 1, |ctx: WorkflowContext, _: Value| async move {
        let kid: String = ctx.child("kid", &json!(null)).await?;
        Ok::<_, WorkflowError>(json!({ "kid_ran_in": kid }))
    });
    r.workflow("kid", 1, |ctx: WorkflowContext, _: Value| async move {
        Ok::<_, WorkflowError>(ctx.namespace().to_string())
    });
    // An operator engine (no namespace) recovers it once the lease ran out.
    let h = backend.start_on(store.clone(), r).await;
    clock.advance(Duration::from_millis(200));
    let done = wait_for(&h.store, &parent.id, RunStatus::Completed).await;
    assert_eq!(done.namespace, acme);
    assert_eq!(done.output, Some(json!({ "kid_ran_in": "acme" })));
    let kid = h
        .store
        .get_run(
            &Scope::Only(acme.clone()),
            &durable::runtime::child_run_id(&parent.id, 0),
        )
        .await
        .unwrap()
        .expect("the child is visible to acme");
    assert_eq!(kid.namespace, acme, "not the operator's default");
    assert_eq!(kid.parent_run_id.as_ref(), Some(&parent.id));
    assert_eq!(kid.root_run_id, parent.id);
    h.stop().await;
}
