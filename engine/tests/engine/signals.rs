//! Signals: buffered before the wait and taken in order, scoped to the run's tenant, and waits
//! that time out durably.

use std::time::Duration;

use durable::StartRun;
use durable::model::{CheckpointKind, CheckpointStatus, Namespace, RunStatus, Scope};
use durable::runtime::Clock;
use serde_json::json;

use crate::backend::Backend;
use crate::common::wait_for;
use crate::registries::signal_registry;

engine_cases! {
    signals_sent_before_the_wait_are_buffered_and_taken_in_order,
    a_signal_wait_times_out_durably,
}

async fn signals_sent_before_the_wait_are_buffered_and_taken_in_order(mut backend: Backend) {
    use durable::store::SignalSent;
    let clock = backend.test_clock();
    let h = backend.start(signal_registry()).await;
    let acme = Namespace::tenant("acme").unwrap();
    let run = h
        .engine
        .start_run(StartRun {
            workflow: "approve-late".into(),
            input: json!({}),
            namespace: Some(acme.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    // Both signals arrive while the run is still asleep (the clock stands still), before it
    // waits.
    for n in [1, 2] {
        let sent = h
            .engine
            .signal(
                &Scope::Only(acme.clone()),
                &run.id,
                "approve",
                json!({ "n": n }),
            )
            .await
            .unwrap();
        assert!(matches!(sent, SignalSent::Delivered(_)), "{sent:?}");
    }
    // Another tenant cannot signal it: the run is invisible to it.
    let other = h
        .engine
        .signal(
            &Scope::Only(Namespace::tenant("globex").unwrap()),
            &run.id,
            "approve",
            json!(0),
        )
        .await
        .unwrap();
    assert!(matches!(other, SignalSent::NotFound));
    // The run's 150 ms sleep ends; it then takes both signals.
    clock.advance(Duration::from_millis(150));
    let done = wait_for(&h.store, &run.id, RunStatus::Completed).await;
    assert_eq!(done.output, Some(json!([{ "n": 1 }, { "n": 2 }])));
    // A signal to a finished run is refused, not buffered.
    let late = h
        .engine
        .signal(&Scope::All, &run.id, "approve", json!(3))
        .await
        .unwrap();
    assert!(matches!(late, SignalSent::RunFinished(_)));
    assert!(h.store.buffered_signals(&run.id).await.unwrap().is_empty());
    h.stop().await;
}

async fn a_signal_wait_times_out_durably(mut backend: Backend) {
    let clock = backend.test_clock();
    let h = backend.start(signal_registry()).await;
    let run = h.start_run("impatient", json!({})).await;
    // Its 100 ms wait for a signal ends with none.
    let waiting = wait_for(&h.store, &run.id, RunStatus::Suspended).await;
    assert_eq!(waiting.wake_at, Some(clock.now() + 100));
    clock.advance(Duration::from_millis(100));
    let done = wait_for(&h.store, &run.id, RunStatus::Completed).await;
    assert_eq!(done.output, Some(json!({ "timed_out": true })));
    let cps = h.store.checkpoints(&Scope::All, &run.id).await.unwrap();
    assert_eq!(cps.len(), 1);
    assert_eq!(cps[0].kind, CheckpointKind::Signal);
    assert_eq!(cps[0].status, CheckpointStatus::Failed);
    assert_eq!(
        cps[0].error.as_ref().and_then(|e| e.code.as_deref()),
        Some("timeout")
    );
    h.stop().await;
}
