//! `ctx.patched`: a change inside one version. A run whose history passed the changed point
//! before the change replays the old path; a run that reaches it after takes the new one, and
//! keeps taking it on every replay.

use durable::model::{RunStatus, Scope};
use durable::prelude::*;
use serde_json::{Value, json};

use crate::backend::Backend;
use crate::common::wait_for;

engine_cases! {
    a_run_past_the_change_keeps_the_old_path_and_a_new_one_takes_the_new,
}

/// `flow`: step `a`, signal `go`, then `b` (old code) or, once patched, `c`, then signal
/// `done`; returns the last step's output.
fn registry(patched: bool) -> Registry {
    let mut r = Registry::new();
    for step in ["a", "b", "c"] {
        r.step(step, move |_ctx: StepContext, _: Value| async move {
            Ok::<_, StepError>(json!(step))
        });
    }
    r.workflow(
        "flow",
        1,
        move |ctx: WorkflowContext, _: Value| async move {
            let _: Value = ctx.step("a", &json!({})).await?;
            let _: Option<Value> = ctx.wait_signal("go", None).await?;
            let last: Value = if patched && ctx.patched("use-c") {
                ctx.step("c", &json!({})).await?
            } else {
                ctx.step("b", &json!({})).await?
            };
            let _: Option<Value> = ctx.wait_signal("done", None).await?;
            Ok::<_, WorkflowError>(last)
        },
    );
    r
}

/// Waits until run `id` has `n` checkpoints.
async fn wait_checkpoints(store: &std::sync::Arc<dyn durable::store::Store>, id: &RunId, n: usize) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let checkpoints = store.checkpoints(&Scope::All, id).await.unwrap();
        if checkpoints.len() >= n {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{id} never reached {n} checkpoints: {checkpoints:#?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

async fn a_run_past_the_change_keeps_the_old_path_and_a_new_one_takes_the_new(backend: Backend) {
    // Old code: the run goes past the changed point (b ran) and waits for `done`.
    let old = backend.start(registry(false)).await;
    let before = old.start_run("flow", json!({})).await.id;
    wait_checkpoints(&old.store, &before, 2).await;
    old.engine
        .signal(&Scope::All, &before, "go", Value::Null)
        .await
        .unwrap();
    wait_checkpoints(&old.store, &before, 4).await;
    old.stop().await;

    // New code: the old run replays b; a new run takes c, and records that it did.
    let new = backend.start(registry(true)).await;
    let after = new.start_run("flow", json!({})).await.id;
    wait_checkpoints(&new.store, &after, 2).await;
    new.engine
        .signal(&Scope::All, &after, "go", Value::Null)
        .await
        .unwrap();
    wait_checkpoints(&new.store, &after, 5).await;
    for id in [&before, &after] {
        new.engine
            .signal(&Scope::All, id, "done", Value::Null)
            .await
            .unwrap();
    }
    let old_run = wait_for(&new.store, &before, RunStatus::Completed).await;
    assert_eq!(old_run.output, Some(json!("b")));
    let new_run = wait_for(&new.store, &after, RunStatus::Completed).await;
    assert_eq!(new_run.output, Some(json!("c")));
    let names: Vec<String> = new
        .store
        .checkpoints(&Scope::All, &after)
        .await
        .unwrap()
        .into_iter()
        .map(|cp| cp.name)
        .collect();
    assert_eq!(names, ["a", "go", "durable.patch.use-c", "c", "done"]);
    new.stop().await;
}
