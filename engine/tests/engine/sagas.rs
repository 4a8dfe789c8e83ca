//! Sagas: a failed run, or one cancelled with compensation, undoes its completed steps newest
//! first, durably (through a restart in the middle), and ends `compensated`, or
//! `compensation_failed` when an undoing step fails for good.

use std::sync::{Arc, Mutex};

use durable::StartRun;
use durable::model::{Checkpoint, CheckpointStatus, RunStatus, Saga, Scope};
use durable::prelude::*;
use serde_json::{Value, json};

use crate::backend::Backend;
use crate::common::{wait_for, wait_for_signal_wait};

engine_cases! {
    a_failed_run_undoes_its_completed_steps_newest_first,
    a_run_cancelled_with_compensation_undoes_what_it_did_and_starts_nothing_new,
    a_compensation_that_fails_for_good_ends_the_run_compensation_failed,
    compensating_resumes_after_a_restart_in_the_middle,
}

/// What ran, in order, across the case's workers.
type Log = Arc<Mutex<Vec<String>>>;

/// `order`: reserve and charge, each undone by a step of its own, then ship, then (with
/// `wait`) a signal; `input.fail` names a step that fails for good. `serve_undo: false` leaves
/// the undoing steps unserved (a process that stops before it can run them).
fn registry(log: &Log, serve_undo: bool) -> Registry {
    let mut r = Registry::new();
    let steps: &[&str] = if serve_undo {
        &["reserve", "charge", "ship", "release", "refund"]
    } else {
        &["reserve", "charge", "ship"]
    };
    for step in steps {
        let (log, step) = (log.clone(), (*step).to_owned());
        r.step(&step.clone(), move |_ctx: StepContext, input: Value| {
            let (log, step) = (log.clone(), step.clone());
            async move {
                log.lock().unwrap().push(step.clone());
                if input["fail"] == json!(step) {
                    return Err(StepError::fatal(format!("{step} failed for good")));
                }
                Ok::<_, StepError>(json!({ "done": step }))
            }
        });
    }
    r.workflow(
        "order",
        1,
        |ctx: WorkflowContext, input: Value| async move {
            let undo = |step: &str| StepOptions::compensate_with(step, &json!({ "order": 7 }));
            let _: Value = ctx.step_with("reserve", &input, undo("release")).await?;
            let _: Value = ctx.step_with("charge", &input, undo("refund")).await?;
            let _: Value = ctx.step("ship", &input).await?;
            if input["wait"] == json!(true) {
                let _: Option<Value> = ctx.wait_signal("go", None).await?;
                let _: Value = ctx.step("ship", &input).await?;
            }
            Ok::<_, WorkflowError>(json!("shipped"))
        },
    );
    r
}

async fn start(engine: &Engine, input: Value) -> RunId {
    engine
        .start_run(StartRun {
            workflow: "order".into(),
            input,
            ..StartRun::default()
        })
        .await
        .unwrap()
        .id
}

/// The compensations among `checkpoints`: (name, the position it undoes), in order.
fn compensations(checkpoints: &[Checkpoint]) -> Vec<(String, u32)> {
    checkpoints
        .iter()
        .filter_map(|cp| match cp.saga {
            Some(Saga::Undoes(seq)) => Some((cp.name.clone(), seq)),
            _ => None,
        })
        .collect()
}

async fn a_failed_run_undoes_its_completed_steps_newest_first(backend: Backend) {
    let log = Log::default();
    let h = backend.start(registry(&log, true)).await;
    let id = start(&h.engine, json!({ "fail": "ship" })).await;
    let run = wait_for(&h.store, &id, RunStatus::Compensated).await;
    assert!(
        run.error.unwrap().message.contains("ship failed for good"),
        "the run keeps the failure that set it compensating"
    );
    assert_eq!(
        *log.lock().unwrap(),
        ["reserve", "charge", "ship", "refund", "release"]
    );
    let checkpoints = h.store.checkpoints(&Scope::All, &id).await.unwrap();
    assert_eq!(
        compensations(&checkpoints),
        [("refund".to_owned(), 1), ("release".to_owned(), 0)]
    );
    assert!(matches!(&checkpoints[0].saga, Some(Saga::Undo { step, .. }) if step == "release"));
    let refund = checkpoints.iter().find(|cp| cp.name == "refund").unwrap();
    assert_eq!(refund.input, Some(json!({ "order": 7 })));
    assert_eq!(refund.status, CheckpointStatus::Completed);

    // A run that fails before any step completed has nothing to undo: it just fails.
    let early = start(&h.engine, json!({ "fail": "reserve" })).await;
    wait_for(&h.store, &early, RunStatus::Failed).await;
    h.stop().await;
}

async fn a_run_cancelled_with_compensation_undoes_what_it_did_and_starts_nothing_new(
    backend: Backend,
) {
    let log = Log::default();
    let h = backend.start(registry(&log, true)).await;
    let id = start(&h.engine, json!({ "wait": true })).await;
    wait_for_signal_wait(&h.store, &id).await;
    let refused = h
        .engine
        .signal(&Scope::All, &id, "durable.compensate", Value::Null)
        .await;
    assert!(refused.is_err(), "the engine's signal names are its own");
    h.engine
        .cancel_compensating(&Scope::All, &id)
        .await
        .unwrap();
    let run = wait_for(&h.store, &id, RunStatus::Compensated).await;
    assert_eq!(run.error.unwrap().code.as_deref(), Some("cancelled"));
    assert_eq!(
        *log.lock().unwrap(),
        ["reserve", "charge", "ship", "refund", "release"],
        "the second ship after the signal never ran"
    );
    let checkpoints = h.store.checkpoints(&Scope::All, &id).await.unwrap();
    assert_eq!(
        compensations(&checkpoints),
        [("refund".to_owned(), 1), ("release".to_owned(), 0)]
    );
    h.stop().await;
}

async fn a_compensation_that_fails_for_good_ends_the_run_compensation_failed(backend: Backend) {
    let log = Log::default();
    let mut r = registry(&log, true);
    // `refund` always fails for good; `release` would come after it.
    r.step("refund", |_ctx: StepContext, _: Value| async move {
        Err::<Value, _>(StepError::fatal(
            "the payment provider refuses refunds today",
        ))
    });
    let h = backend.start(r).await;
    let id = start(&h.engine, json!({ "fail": "ship" })).await;
    let run = wait_for(&h.store, &id, RunStatus::CompensationFailed).await;
    let error = run.error.unwrap();
    assert_eq!(error.code.as_deref(), Some("compensation_failed"));
    assert!(error.message.contains("refund"), "{}", error.message);
    assert!(!log.lock().unwrap().contains(&"release".to_owned()));
    h.stop().await;
}

async fn compensating_resumes_after_a_restart_in_the_middle(backend: Backend) {
    let log = Log::default();
    // First life: no worker serves the undoing steps, so the run stops at its first
    // compensation, sent and unanswered.
    let first = backend.start(registry(&log, false)).await;
    let id = start(&first.engine, json!({ "fail": "ship" })).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let checkpoints = first.store.checkpoints(&Scope::All, &id).await.unwrap();
        if !compensations(&checkpoints).is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never started compensating"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    first.stop().await;
    assert_eq!(*log.lock().unwrap(), ["reserve", "charge", "ship"]);

    // Second life: the compensation is sent again and the rest follows, each once.
    let second = backend.start(registry(&log, true)).await;
    wait_for(&second.store, &id, RunStatus::Compensated).await;
    assert_eq!(
        *log.lock().unwrap(),
        ["reserve", "charge", "ship", "refund", "release"]
    );
    let checkpoints = second.store.checkpoints(&Scope::All, &id).await.unwrap();
    assert_eq!(
        compensations(&checkpoints),
        [("refund".to_owned(), 1), ("release".to_owned(), 0)]
    );
    second.stop().await;
}
