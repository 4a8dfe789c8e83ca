//! Queries and updates: a query answers from the run's replayed state and writes nothing; an
//! update is checked by its handler, kept with the run under its id, delivered once as a signal,
//! and its reply outlives the process that gave it. Neither crosses a tenant.

use std::sync::{Arc, Mutex};

use durable::model::{Namespace, RunStatus, Scope, UpdateId};
use durable::prelude::*;
use durable::runtime::{HandlerError, HandlerKind};
use durable::{EngineError, StartRun, UpdateOutcome};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::backend::Backend;
use crate::common::{wait_for, wait_for_signal_wait};

engine_cases! {
    a_query_answers_from_the_replayed_state_and_writes_nothing,
    an_update_is_checked_kept_and_delivered_once,
    an_update_reply_survives_a_restart,
}

#[derive(Deserialize)]
struct Approval {
    by: String,
}

/// `desk`: one step (`prepare`), then waits for `approve` (a signal, or the update of that name
/// with a non-empty `by`), then for `finish`. Query `state` says where it is; query `step`
/// takes a number.
fn registry() -> Registry {
    let mut r = Registry::new();
    r.step("prepare", |_ctx: StepContext, _: Value| async move {
        Ok::<_, StepError>(json!("prepared"))
    });
    r.workflow(
        "desk",
        1,
        |ctx: WorkflowContext, _input: Value| async move {
            let state = Arc::new(Mutex::new(json!({ "stage": "preparing" })));
            let shown = state.clone();
            ctx.on_query("state", move |_: Value| shown.lock().unwrap().clone());
            ctx.on_query("step", |n: u32| format!("step {n}"));
            ctx.on_update("approve", |a: Approval| {
                if a.by.is_empty() {
                    Err("`by` must name who approves")
                } else {
                    Ok(json!({ "accepted": a.by }))
                }
            });
            let prepared: Value = ctx.step("prepare", &json!({})).await?;
            *state.lock().unwrap() = json!({ "stage": "waiting", "prepared": prepared });
            let approval: Option<Value> = ctx.wait_signal("approve", None).await?;
            *state.lock().unwrap() = json!({ "stage": "approved", "approval": approval });
            let _: Option<Value> = ctx.wait_signal("finish", None).await?;
            Ok::<_, WorkflowError>(json!({ "approval": approval }))
        },
    );
    r
}

fn acme() -> Namespace {
    Namespace::tenant("acme").unwrap()
}

async fn start(engine: &Engine) -> RunId {
    engine
        .start_run(StartRun {
            workflow: "desk".into(),
            input: json!({}),
            namespace: Some(acme()),
            ..StartRun::default()
        })
        .await
        .unwrap()
        .id
}

async fn a_query_answers_from_the_replayed_state_and_writes_nothing(backend: Backend) {
    let h = backend.start(registry()).await;
    let id = start(&h.engine).await;
    wait_for_signal_wait(&h.store, &id).await;
    let scope = Scope::Only(acme());
    let before = h.store.get_run(&Scope::All, &id).await.unwrap().unwrap();
    let checkpoints = h.store.checkpoints(&Scope::All, &id).await.unwrap();

    let state = h.engine.query(&scope, &id, "state", Value::Null).await;
    assert_eq!(
        state.unwrap(),
        Some(json!({ "stage": "waiting", "prepared": "prepared" }))
    );
    let step = h.engine.query(&scope, &id, "step", json!(3)).await;
    assert_eq!(step.unwrap(), Some(json!("step 3")));
    // Nothing was written: the run and its history are as they were.
    let after = h.store.get_run(&Scope::All, &id).await.unwrap().unwrap();
    assert_eq!(after.updated_at, before.updated_at);
    assert_eq!(
        h.store.checkpoints(&Scope::All, &id).await.unwrap(),
        checkpoints
    );

    match h.engine.query(&scope, &id, "stat", Value::Null).await {
        Err(EngineError::NoHandler { kind, known, .. }) => {
            assert_eq!(kind, HandlerKind::Query);
            assert_eq!(known, ["state", "step"]);
        }
        other => panic!("an unknown query: {other:?}"),
    }
    let misfit = h.engine.query(&scope, &id, "step", json!("three")).await;
    assert!(
        matches!(misfit, Err(EngineError::Handler(HandlerError::Argument(_)))),
        "{misfit:?}"
    );
    // Another tenant's query finds no run.
    let globex = Scope::Only(Namespace::tenant("globex").unwrap());
    let crossed = h.engine.query(&globex, &id, "state", Value::Null).await;
    assert_eq!(crossed.unwrap(), None);

    // An ended run still answers, from its whole history.
    for signal in ["approve", "finish"] {
        h.engine
            .signal(&scope, &id, signal, json!("ok"))
            .await
            .unwrap();
    }
    wait_for(&h.store, &id, RunStatus::Completed).await;
    let state = h.engine.query(&scope, &id, "state", Value::Null).await;
    assert_eq!(
        state.unwrap(),
        Some(json!({ "stage": "approved", "approval": "ok" }))
    );
    h.stop().await;
}

async fn an_update_is_checked_kept_and_delivered_once(backend: Backend) {
    let h = backend.start(registry()).await;
    let id = start(&h.engine).await;
    wait_for_signal_wait(&h.store, &id).await;
    let scope = Scope::Only(acme());
    let update = |argument: Value, update_id: Option<&str>| {
        let update_id = update_id.map(|u| UpdateId::parse(u).unwrap());
        h.engine.update(&scope, &id, "approve", argument, update_id)
    };

    // Refused: the handler's reason comes back and nothing is kept or delivered.
    match update(json!({ "by": "" }), Some("u1")).await {
        Err(EngineError::Handler(HandlerError::Refused { reason, .. })) => {
            assert!(reason.contains("`by`"), "{reason}");
        }
        other => panic!("an empty approver: {other:?}"),
    }
    assert!(h.store.buffered_signals(&id).await.unwrap().is_empty());
    let misfit = update(json!({ "who": "ann" }), None).await;
    assert!(
        matches!(misfit, Err(EngineError::Handler(HandlerError::Argument(_)))),
        "{misfit:?}"
    );
    // Another tenant's update finds no run.
    let crossed = h
        .engine
        .update(
            &Scope::Only(Namespace::tenant("globex").unwrap()),
            &id,
            "approve",
            json!({ "by": "mallory" }),
            None,
        )
        .await;
    assert!(
        matches!(crossed, Ok(UpdateOutcome::NotFound)),
        "{crossed:?}"
    );

    // Accepted under u1 (the refused try kept nothing under it): the run takes it as signal
    // `approve`.
    let accepted = update(json!({ "by": "ann" }), Some("u1")).await.unwrap();
    assert!(
        matches!(&accepted, UpdateOutcome::Replied(r) if *r == json!({ "accepted": "ann" })),
        "{accepted:?}"
    );
    h.engine
        .signal(&scope, &id, "finish", Value::Null)
        .await
        .unwrap();
    let run = wait_for(&h.store, &id, RunStatus::Completed).await;
    assert_eq!(run.output, Some(json!({ "approval": { "by": "ann" } })));

    // Repeated under u1 once the run ended: the first reply, nothing delivered.
    let again = update(json!({ "by": "bob" }), Some("u1")).await.unwrap();
    assert!(
        matches!(&again, UpdateOutcome::Replied(r) if *r == json!({ "accepted": "ann" })),
        "{again:?}"
    );
    // A fresh update to an ended run is refused; u1 names another update than `finish`.
    let late = update(json!({ "by": "bob" }), Some("u2")).await.unwrap();
    assert!(matches!(late, UpdateOutcome::RunFinished(_)), "{late:?}");
    let taken = h
        .engine
        .update(
            &scope,
            &id,
            "finish",
            Value::Null,
            Some(UpdateId::parse("u1").unwrap()),
        )
        .await;
    assert!(
        matches!(taken, Err(EngineError::UpdateIdTaken { .. })),
        "{taken:?}"
    );
    assert!(h.store.buffered_signals(&id).await.unwrap().is_empty());
    h.stop().await;
}

async fn an_update_reply_survives_a_restart(backend: Backend) {
    let first = backend.start(registry()).await;
    let id = start(&first.engine).await;
    wait_for_signal_wait(&first.store, &id).await;
    let scope = Scope::Only(acme());
    let update_id = UpdateId::parse("approve-42").unwrap();
    let replied = first
        .engine
        .update(
            &scope,
            &id,
            "approve",
            json!({ "by": "ann" }),
            Some(update_id.clone()),
        )
        .await
        .unwrap();
    assert!(matches!(replied, UpdateOutcome::Replied(_)));
    first.stop().await;

    // Another process, as after a restart: the caller repeats the update and gets the same
    // reply, and the run gets it once.
    let second = backend.start(registry()).await;
    let again = second
        .engine
        .update(
            &scope,
            &id,
            "approve",
            json!({ "by": "ann" }),
            Some(update_id),
        )
        .await
        .unwrap();
    assert!(
        matches!(&again, UpdateOutcome::Replied(r) if *r == json!({ "accepted": "ann" })),
        "{again:?}"
    );
    second
        .engine
        .signal(&scope, &id, "finish", Value::Null)
        .await
        .unwrap();
    let run = wait_for(&second.store, &id, RunStatus::Completed).await;
    assert_eq!(run.output, Some(json!({ "approval": { "by": "ann" } })));
    assert!(second.store.buffered_signals(&id).await.unwrap().is_empty());
    second.stop().await;
}
