//! Engine-internal work under a customer backlog (SPEC §8, the system tenant): a timer's
//! wake-up keeps its timing while a tenant has 10,000 runs waiting, for another tenant and for
//! the busy tenant itself. Wake-ups are not queued behind customer work: the sweep, lease and
//! redispatch loops are tasks of their own, and a run whose timer passed is due at its timer, so
//! the fair pick serves it ahead of work that became due after it.

use std::time::Duration;

use durable::model::{Namespace, RunId, RunStatus};
use durable::prelude::*;
use durable::runtime::Clock;
use durable::store::NewRun;
use durable::{Engine, StartRun};
use futures::StreamExt;
use serde_json::{Value, json};

use crate::backend::Backend;
use crate::common::{wait_for, wait_until};

engine_cases! {
    [multi_thread] a_timer_keeps_its_timing_under_a_ten_thousand_run_backlog,
}

const BACKLOG: usize = 10_000;

async fn start(engine: &Engine, tenant: &str, workflow: &str) -> RunId {
    engine
        .start_run(StartRun {
            workflow: workflow.into(),
            input: json!(null),
            namespace: Some(Namespace::tenant(tenant).unwrap()),
            ..Default::default()
        })
        .await
        .unwrap()
        .id
}

async fn a_timer_keeps_its_timing_under_a_ten_thousand_run_backlog(backend: Backend) {
    let mut r = Registry::new();
    r.workflow("busy", 1, |_ctx: WorkflowContext, _: Value| async move {
        Ok::<_, WorkflowError>(json!("done"))
    });
    r.workflow("nap", 1, |ctx: WorkflowContext, _: Value| async move {
        ctx.sleep(Duration::from_millis(500)).await;
        Ok::<_, WorkflowError>(json!("awake"))
    });
    // Acme's backlog is on record before any control plane runs, all of it due before the
    // timers are set.
    let store = backend.store().await;
    let acme = Namespace::tenant("acme").unwrap();
    let now = durable::runtime::SystemClock.now();
    futures::stream::iter(0..BACKLOG)
        .for_each_concurrent(64, |n| {
            let (store, acme) = (store.clone(), acme.clone());
            async move {
                let id = RunId::parse(&format!("busy-{n}")).unwrap();
                let new = NewRun::top_level(id, acme, "busy", 1, json!(n));
                store.create_run(new, now, None).await.unwrap();
            }
        })
        .await;
    let h = backend.start_on(store.clone(), r).await;
    let globex_nap = start(&h.engine, "globex", "nap").await;
    let acme_nap = start(&h.engine, "acme", "nap").await;
    for id in [&globex_nap, &acme_nap] {
        wait_for(&store, id, RunStatus::Completed).await;
    }
    // Both woke while most of acme's backlog still waited to start: not behind it.
    let usage = store
        .usage(&acme, durable::runtime::SystemClock.now())
        .await
        .unwrap();
    assert!(
        usage.queued > 1_000,
        "the timers woke only after the backlog drained to {} queued runs",
        usage.queued
    );
    // The backlog itself goes on to the end.
    let last = RunId::parse("busy-9999").unwrap();
    wait_until(&store, &last, Duration::from_secs(180), |run| {
        run.status == RunStatus::Completed
    })
    .await;
    h.stop().await;
}
