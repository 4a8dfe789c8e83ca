//! Starts: a start persists its first turn with the insert, and a refused start runs nothing.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use durable::model::{CheckpointKind, RunId, RunStatus, Scope};
use durable::prelude::*;
use durable::{EngineError, StartRun};
use serde_json::{Value, json};

use crate::backend::Backend;
use crate::common::wait_for;
use crate::registries::order_registry;

engine_cases! {
    a_refused_start_runs_nothing,
}

/// A start persists its run's first turn with the insert when that turn runs no local step; a
/// start refused for a reused id sends and runs nothing, whether its first turn would have sent a
/// remote step or run a local one.
async fn a_refused_start_runs_nothing(backend: Backend) {
    let executions = Arc::new(AtomicU32::new(0));
    let mut r = order_registry(executions.clone());
    let locals = Arc::new(AtomicU32::new(0));
    let seen = locals.clone();
    r.workflow("local-first", 1, move |ctx: WorkflowContext, _: Value| {
        let seen = seen.clone();
        async move {
            let n: u32 = ctx
                .local_step("count", || async move {
                    Ok(seen.fetch_add(1, Ordering::SeqCst) + 1)
                })
                .await?;
            Ok::<_, WorkflowError>(n)
        }
    });
    let h = backend.start(r).await;
    let start_as = |workflow: &str, input: Value| StartRun {
        workflow: workflow.into(),
        input,
        id: Some(RunId::parse(&format!("fixed-{workflow}")).expect("id")),
        ..Default::default()
    };
    let sum = h
        .engine
        .start_run(start_as("sum3", json!(1)))
        .await
        .expect("start");
    assert_eq!(
        sum.status,
        RunStatus::Suspended,
        "the first turn was persisted with the start"
    );
    let first = h.store.checkpoints(&Scope::All, &sum.id).await.unwrap();
    assert_eq!(first[0].kind, CheckpointKind::RemoteStep);
    wait_for(&h.store, &sum.id, RunStatus::Completed).await;
    let local = h
        .engine
        .start_run(start_as("local-first", json!(null)))
        .await
        .expect("start");
    let local = wait_for(&h.store, &local.id, RunStatus::Completed).await;
    assert_eq!(local.output, Some(json!(1)));

    for (workflow, input) in [("sum3", json!(1)), ("local-first", json!(null))] {
        let again = h.engine.start_run(start_as(workflow, input)).await;
        assert!(
            matches!(&again, Err(EngineError::RunExists(id)) if id.as_str() == format!("fixed-{workflow}")),
            "a reused id is refused: {again:?}"
        );
    }
    // Whatever a refused start had sent would have run by now on the case's worker.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(executions.load(Ordering::SeqCst), 3, "no step ran again");
    assert_eq!(locals.load(Ordering::SeqCst), 1, "no local step ran again");
    h.stop().await;
}
