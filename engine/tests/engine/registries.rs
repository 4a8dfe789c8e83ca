//! Workflows and steps several behaviours run.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use durable::prelude::*;
use serde_json::{Value, json};

/// Workflow `sum3`: three `add` steps in a row, each counted in `executions`.
pub fn order_registry(executions: Arc<AtomicU32>) -> Registry {
    let mut r = Registry::new();
    let ex = executions.clone();
    r.step("add", move |_ctx: StepContext, (a, b): (i64, i64)| {
        let ex = ex.clone();
        async move {
            ex.fetch_add(1, Ordering::SeqCst);
            Ok::<_, StepError>(a + b)
        }
    });
    r.workflow("sum3", 1, |ctx: WorkflowContext, n: i64| async move {
        let a: i64 = ctx.step("add", &(n, 1)).await?;
        let b: i64 = ctx.step("add", &(a, 1)).await?;
        let c: i64 = ctx.step("add", &(b, 1)).await?;
        Ok::<_, WorkflowError>(json!({ "total": c }))
    });
    r
}

/// Workflows that wait for signals: `approve-late` (sleeps, then takes two `approve`
/// signals) and `impatient` (waits 100 ms for a signal that never comes).
pub fn signal_registry() -> Registry {
    let mut r = Registry::new();
    // Sleeps first, so a signal sent right after the start arrives before the wait.
    r.workflow(
        "approve-late",
        1,
        |ctx: WorkflowContext, _: Value| async move {
            ctx.sleep(Duration::from_millis(150)).await;
            let first: Option<Value> = ctx.wait_signal("approve", None).await?;
            let second: Option<Value> = ctx.wait_signal("approve", None).await?;
            Ok::<_, WorkflowError>(json!([first, second]))
        },
    );
    r.workflow(
        "impatient",
        1,
        |ctx: WorkflowContext, _: Value| async move {
            let got: Option<Value> = ctx
                .wait_signal("never", Some(Duration::from_millis(100)))
                .await?;
            Ok::<_, WorkflowError>(json!({ "timed_out": got.is_none() }))
        },
    );
    r
}
