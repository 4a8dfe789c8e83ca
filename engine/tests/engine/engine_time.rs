//! Engine time comes from the engine's clock: a timer fires when the clock passes it, however
//! little wall time went by (the cases that advance a [`durable::runtime::TestClock`] instead
//! of sleeping rely on it).

use std::time::{Duration, Instant};

use durable::model::{CheckpointKind, CheckpointStatus, RunStatus, Scope};
use durable::prelude::*;
use durable::runtime::Clock;
use serde_json::json;

use crate::backend::Backend;
use crate::common::wait_for;

engine_cases! {
    an_hour_long_timer_fires_once_the_clock_is_advanced_an_hour,
}

async fn an_hour_long_timer_fires_once_the_clock_is_advanced_an_hour(mut backend: Backend) {
    const HOUR: Duration = Duration::from_secs(3600);
    let clock = backend.test_clock();
    let mut r = Registry::new();
    r.workflow(
        "hour",
        1,
        |ctx: WorkflowContext, _: serde_json::Value| async move {
            let before = ctx.now().await;
            ctx.sleep(HOUR).await;
            let after = ctx.now().await;
            Ok::<_, WorkflowError>(json!({ "before": before, "after": after }))
        },
    );
    let h = backend.start(r).await;
    let run = h.start_run("hour", json!(null)).await;
    let asleep = wait_for(&h.store, &run.id, RunStatus::Suspended).await;
    let started = clock.now();
    assert_eq!(asleep.wake_at, Some(started + 3_600_000), "due in an hour");

    let wall = Instant::now();
    clock.advance(HOUR);
    let done = wait_for(&h.store, &run.id, RunStatus::Completed).await;
    let took = wall.elapsed();
    assert!(took < Duration::from_secs(1), "the hour took {took:?}");
    assert_eq!(
        done.output,
        Some(json!({ "before": started, "after": started + 3_600_000 })),
        "the workflow saw exactly an hour pass"
    );
    let cps = h.store.checkpoints(&Scope::All, &run.id).await.unwrap();
    let timer = cps
        .iter()
        .find(|c| c.kind == CheckpointKind::Sleep)
        .expect("the timer");
    assert_eq!(timer.status, CheckpointStatus::Completed, "fired once");
    h.stop().await;
}
