//! Plans: ceilings hold (with several control planes racing on one store), usage returns to
//! zero however runs end, a queued run starts by itself when a slot frees, and a start over a
//! rate, queue or payload ceiling is refused with the limit named.

use std::sync::Arc;
use std::time::Duration;

use durable::model::{Limit, Namespace, Plan, Run, RunId, RunStatus, Scope};
use durable::prelude::*;
use durable::runtime::Clock;
use durable::store::{Claim, NewRun, Store};
use durable::{EngineError, QuotaExceeded, StartRun};
use serde_json::{Value, json};

use crate::backend::Backend;
use crate::common::wait_for;
use crate::harness::Harness;

engine_cases! {
    a_queued_run_starts_by_itself_when_a_slot_frees,
    three_control_planes_racing_never_start_more_than_the_ceiling,
    a_cancel_and_a_crashed_planes_run_give_their_slots_back,
    starts_over_the_rate_or_queue_ceiling_are_refused_with_when_to_retry,
    payloads_and_nesting_over_the_plan_are_refused,
    three_control_planes_spend_one_rate_allowance,
    a_retried_run_waits_for_a_slot_like_a_new_start,
    a_plan_set_on_one_plane_holds_on_the_others,
}

fn acme() -> Namespace {
    Namespace::tenant("acme").unwrap()
}

fn globex() -> Namespace {
    Namespace::tenant("globex").unwrap()
}

/// `hold` waits for a `go` signal, then completes; `nest` starts a child of itself until its
/// input reaches 0; `fail` fails.
fn registry() -> Registry {
    let mut r = Registry::new();
    r.workflow("fail", 1, |_ctx: WorkflowContext, _: Value| async move {
        Err::<Value, _>(WorkflowError::msg("fails every time"))
    });
    r.workflow("hold", 1, |ctx: WorkflowContext, _: Value| async move {
        let _: Option<Value> = ctx.wait_signal("go", None).await?;
        Ok::<_, WorkflowError>(json!("done"))
    });
    r.workflow("nest", 1, |ctx: WorkflowContext, depth: u32| async move {
        if depth == 0 {
            return Ok::<_, WorkflowError>(json!(0));
        }
        let below: Value = ctx.child("nest", &(depth - 1)).await?;
        Ok(json!(below.as_u64().unwrap_or(0) + 1))
    });
    r
}

async fn start(
    engine: &Engine,
    tenant: &Namespace,
    workflow: &str,
    input: Value,
) -> Result<Run, EngineError> {
    engine
        .start_run(StartRun {
            workflow: workflow.into(),
            input,
            namespace: Some(tenant.clone()),
            ..Default::default()
        })
        .await
}

/// The tenant's top-level runs started and not ended, read from the store.
async fn started(store: &Arc<dyn Store>, tenant: &Namespace) -> u64 {
    store
        .usage(tenant, durable::runtime::SystemClock.now())
        .await
        .unwrap()
        .running
}

/// Waits (10 s at most) until `check` holds of the tenant's usage.
async fn usage_reaches(
    store: &Arc<dyn Store>,
    tenant: &Namespace,
    check: impl Fn(u64, u64) -> bool,
) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let usage = store
            .usage(tenant, durable::runtime::SystemClock.now())
            .await
            .unwrap();
        if check(usage.running, usage.queued) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "usage never got there: {usage:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Signals `go` to every run of `tenant` that waits for it, until all of `ids` completed.
async fn release_all(h: &Harness, ids: &[RunId]) {
    for id in ids {
        let _ = h.engine.signal(&Scope::All, id, "go", json!(null)).await;
    }
    for id in ids {
        wait_for(&h.store, id, RunStatus::Completed).await;
    }
}

async fn a_queued_run_starts_by_itself_when_a_slot_frees(backend: Backend) {
    let h = backend.start(registry()).await;
    h.engine
        .set_plan(
            Some(&acme()),
            Plan {
                max_concurrent_runs: Some(2),
                ..Plan::default()
            },
        )
        .await
        .unwrap();
    let mut ids = Vec::new();
    for _ in 0..5 {
        ids.push(
            start(&h.engine, &acme(), "hold", json!(null))
                .await
                .unwrap()
                .id,
        );
    }
    // Another tenant is not held by acme's ceiling.
    let other = start(&h.engine, &globex(), "hold", json!(null))
        .await
        .unwrap();
    wait_for(&h.store, &other.id, RunStatus::Suspended).await;
    usage_reaches(&h.store, &acme(), |running, queued| {
        running == 2 && queued == 3
    })
    .await;
    // And it stays there: the queued runs wait, parked by the quota.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(started(&h.store, &acme()).await, 2);
    let queued = h
        .store
        .get_run(&Scope::All, &ids[4])
        .await
        .unwrap()
        .unwrap();
    assert_eq!(queued.status, RunStatus::Pending);
    // One ends: the next starts by itself, no one pokes it.
    let mut first = None;
    for id in &ids {
        let run = h.store.get_run(&Scope::All, id).await.unwrap().unwrap();
        if run.status == RunStatus::Suspended {
            first = Some(run.id);
            break;
        }
    }
    let first = first.expect("a started run");
    h.engine
        .signal(&Scope::All, &first, "go", json!(null))
        .await
        .unwrap();
    wait_for(&h.store, &first, RunStatus::Completed).await;
    usage_reaches(&h.store, &acme(), |running, queued| {
        running == 2 && queued == 2
    })
    .await;
    // Raising the ceiling lets the rest start at once.
    h.engine
        .set_plan(
            Some(&acme()),
            Plan {
                max_concurrent_runs: Some(10),
                ..Plan::default()
            },
        )
        .await
        .unwrap();
    usage_reaches(&h.store, &acme(), |running, queued| {
        running == 4 && queued == 0
    })
    .await;
    release_all(&h, &ids).await;
    release_all(&h, &[other.id]).await;
    usage_reaches(&h.store, &acme(), |running, queued| {
        running == 0 && queued == 0
    })
    .await;
    h.stop().await;
}

async fn three_control_planes_racing_never_start_more_than_the_ceiling(backend: Backend) {
    let planes = [
        backend.start(registry()).await,
        backend.start(registry()).await,
        backend.start(registry()).await,
    ];
    planes[0]
        .engine
        .set_plan(
            Some(&acme()),
            Plan {
                max_concurrent_runs: Some(3),
                ..Plan::default()
            },
        )
        .await
        .unwrap();
    // Every plane reads plans at most a second old.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let mut ids = Vec::new();
    for i in 0..24 {
        let plane = &planes[i % 3];
        ids.push(
            start(&plane.engine, &acme(), "hold", json!(null))
                .await
                .unwrap()
                .id,
        );
    }
    let store = &planes[0].store;
    // Release runs one by one from every plane while the others race to start the queued
    // ones; the count of started runs never passes the ceiling.
    let mut done = 0;
    while done < ids.len() {
        let running = started(store, &acme()).await;
        assert!(
            running <= 3,
            "{running} started at once, over the ceiling of 3"
        );
        let mut released = false;
        for id in &ids {
            let run = store.get_run(&Scope::All, id).await.unwrap().unwrap();
            if run.status == RunStatus::Suspended {
                let plane = &planes[done % 3];
                plane
                    .engine
                    .signal(&Scope::All, id, "go", json!(null))
                    .await
                    .unwrap();
                wait_for(store, id, RunStatus::Completed).await;
                done += 1;
                released = true;
                break;
            }
        }
        if !released {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    usage_reaches(store, &acme(), |running, queued| {
        running == 0 && queued == 0
    })
    .await;
    for plane in planes {
        plane.stop().await;
    }
}

async fn a_cancel_and_a_crashed_planes_run_give_their_slots_back(mut backend: Backend) {
    let clock = backend.test_clock();
    let store = backend.store().await;
    store
        .put_plan(
            Some(&acme()),
            &Plan {
                max_concurrent_runs: Some(1),
                ..Plan::default()
            },
            clock.now(),
        )
        .await
        .unwrap();
    // A control plane claimed acme's run and died mid-run: its lease runs out in 100 ms.
    let now = clock.now();
    let orphan = store
        .create_run(
            NewRun::top_level(
                RunId::parse("orphan-1").unwrap(),
                acme(),
                "hold",
                1,
                json!(null),
            ),
            now,
            Some(&Claim {
                scope: Scope::All,
                owner: "killed-plane".into(),
                until: now + 100,
            }),
        )
        .await
        .unwrap();
    let h = backend.start_on(store.clone(), registry()).await;
    // Its slot is still taken: the dead plane's run is started and not ended.
    let waiting = start(&h.engine, &acme(), "hold", json!(null))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        store
            .get_run(&Scope::All, &waiting.id)
            .await
            .unwrap()
            .unwrap()
            .status,
        RunStatus::Pending
    );
    // The survivor takes the orphan over once its lease lapses, and it finishes: the slot
    // comes back, and the queued run starts.
    clock.advance(Duration::from_millis(200));
    wait_for(&store, &orphan.id, RunStatus::Suspended).await;
    h.engine
        .signal(&Scope::All, &orphan.id, "go", json!(null))
        .await
        .unwrap();
    wait_for(&store, &orphan.id, RunStatus::Completed).await;
    wait_for(&store, &waiting.id, RunStatus::Suspended).await;
    // A cancel gives its slot back too.
    let next = start(&h.engine, &acme(), "hold", json!(null))
        .await
        .unwrap();
    h.engine.cancel(&Scope::All, &waiting.id).await.unwrap();
    wait_for(&store, &next.id, RunStatus::Suspended).await;
    h.engine.cancel(&Scope::All, &next.id).await.unwrap();
    usage_reaches(&store, &acme(), |running, queued| {
        running == 0 && queued == 0
    })
    .await;
    h.stop().await;
}

async fn starts_over_the_rate_or_queue_ceiling_are_refused_with_when_to_retry(backend: Backend) {
    let h = backend.start(registry()).await;
    h.engine
        .set_plan(
            Some(&acme()),
            Plan {
                starts_per_minute: Some(3),
                ..Plan::default()
            },
        )
        .await
        .unwrap();
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(
            start(&h.engine, &acme(), "hold", json!(null))
                .await
                .unwrap()
                .id,
        );
    }
    match start(&h.engine, &acme(), "hold", json!(null)).await {
        Err(EngineError::QuotaExceeded(QuotaExceeded {
            limit: Limit::StartsPerMinute,
            ceiling: 3,
            retry_after_ms: Some(wait),
            ..
        })) => assert!(wait > 0 && wait <= 20_000, "one frees within 20 s: {wait}"),
        other => panic!("the fourth start in a minute is refused: {other:?}"),
    }
    // globex spends its own allowance, not acme's.
    ids.push(
        start(&h.engine, &globex(), "hold", json!(null))
            .await
            .unwrap()
            .id,
    );

    // A queue ceiling: one runs, two wait, the next is refused.
    h.engine
        .set_plan(
            Some(&globex()),
            Plan {
                max_concurrent_runs: Some(1),
                max_queued_runs: Some(2),
                ..Plan::default()
            },
        )
        .await
        .unwrap();
    wait_for(&h.store, ids.last().unwrap(), RunStatus::Suspended).await;
    for _ in 0..2 {
        ids.push(
            start(&h.engine, &globex(), "hold", json!(null))
                .await
                .unwrap()
                .id,
        );
    }
    match start(&h.engine, &globex(), "hold", json!(null)).await {
        Err(EngineError::QuotaExceeded(QuotaExceeded {
            limit: Limit::MaxQueuedRuns,
            ceiling: 2,
            retry_after_ms: Some(_),
            ..
        })) => {}
        other => panic!("a third queued run is refused: {other:?}"),
    }
    release_all(&h, &ids).await;
    h.stop().await;
}

async fn payloads_and_nesting_over_the_plan_are_refused(backend: Backend) {
    let h = backend.start(registry()).await;
    h.engine
        .set_plan(
            Some(&acme()),
            Plan {
                max_payload_bytes: Some(64),
                max_nesting_depth: Some(1),
                ..Plan::default()
            },
        )
        .await
        .unwrap();
    let big = json!({ "blob": "x".repeat(100) });
    match start(&h.engine, &acme(), "hold", big.clone()).await {
        Err(EngineError::QuotaExceeded(QuotaExceeded {
            limit: Limit::MaxPayloadBytes,
            retry_after_ms: None,
            ..
        })) => {}
        other => panic!("an input over 64 bytes is refused: {other:?}"),
    }
    let held = start(&h.engine, &acme(), "hold", json!(null))
        .await
        .unwrap();
    let signal = h
        .engine
        .signal(&Scope::Only(acme()), &held.id, "go", big)
        .await;
    assert!(
        matches!(signal, Err(EngineError::QuotaExceeded(_))),
        "a signal payload over 64 bytes is refused: {signal:?}"
    );
    // Depth 1 is allowed; its child at depth 2 is not, and fails the chain with the reason.
    let shallow = start(&h.engine, &acme(), "nest", json!(1)).await.unwrap();
    let shallow = wait_for(&h.store, &shallow.id, RunStatus::Completed).await;
    assert_eq!(shallow.output, Some(json!(1)));
    let deep = start(&h.engine, &acme(), "nest", json!(2)).await.unwrap();
    let deep = wait_for(&h.store, &deep.id, RunStatus::Failed).await;
    let error = deep.error.expect("an error");
    assert!(error.message.contains("max_nesting_depth"), "{error:?}");
    // Another tenant's plan is its own.
    let other = start(&h.engine, &globex(), "nest", json!(3)).await.unwrap();
    wait_for(&h.store, &other.id, RunStatus::Completed).await;
    release_all(&h, &[held.id]).await;
    h.stop().await;
}

/// Three control planes on Redis (each its own connection), or the one embedded process, taking
/// 30 concurrent starts of one tenant accept no more than its rate between them.
async fn three_control_planes_spend_one_rate_allowance(backend: Backend) {
    let store = backend.store().await;
    store
        .put_plan(
            Some(&acme()),
            &Plan {
                starts_per_minute: Some(10),
                ..Plan::default()
            },
            0,
        )
        .await
        .unwrap();
    // Embedded, one process is the whole deployment: its engine takes every start.
    let planes_wanted = if backend.sqlite_file().is_some() {
        1
    } else {
        3
    };
    let mut planes = Vec::new();
    for _ in 0..planes_wanted {
        let engine = backend.engine(
            backend.store().await,
            backend.transport().await,
            Arc::new(registry()),
            durable::EngineConfig::default(),
        );
        engine.start().await.unwrap();
        planes.push(engine);
    }
    let starts = (0..30).map(|i| {
        let plane = planes[i % planes.len()].clone();
        async move { start(&plane, &acme(), "hold", json!(null)).await }
    });
    let results = futures::future::join_all(starts).await;
    let accepted = results.iter().filter(|r| r.is_ok()).count();
    let refused = results
        .iter()
        .filter(|r| matches!(r, Err(EngineError::QuotaExceeded(q)) if q.limit == Limit::StartsPerMinute))
        .count();
    assert_eq!(accepted, 10, "{results:?}");
    assert_eq!(refused, 20);
    for plane in planes {
        plane.shutdown().await;
    }
}

async fn a_retried_run_waits_for_a_slot_like_a_new_start(backend: Backend) {
    let h = backend.start(registry()).await;
    h.engine
        .set_plan(
            Some(&acme()),
            Plan {
                max_concurrent_runs: Some(1),
                ..Plan::default()
            },
        )
        .await
        .unwrap();
    let mut failed = Vec::new();
    for _ in 0..2 {
        let run = start(&h.engine, &acme(), "fail", json!(null))
            .await
            .unwrap();
        wait_for(&h.store, &run.id, RunStatus::Failed).await;
        failed.push(run.id);
    }
    let holder = start(&h.engine, &acme(), "hold", json!(null))
        .await
        .unwrap();
    wait_for(&h.store, &holder.id, RunStatus::Suspended).await;
    // The tenant's own retry and the operator's alike wait for the slot.
    h.engine
        .retry(&Scope::Only(acme()), &failed[0])
        .await
        .unwrap();
    h.engine.retry(&Scope::All, &failed[1]).await.unwrap();
    usage_reaches(&h.store, &acme(), |running, queued| {
        running == 1 && queued == 2
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    for id in &failed {
        let retried = h.store.get_run(&Scope::All, id).await.unwrap().unwrap();
        assert_eq!(
            retried.status,
            RunStatus::Pending,
            "a retry took the slot another run holds"
        );
        assert!(retried.is_fresh());
    }
    assert_eq!(started(&h.store, &acme()).await, 1);
    // The slot frees: the retried runs start by themselves, one at a time, and fail again.
    release_all(&h, &[holder.id]).await;
    for id in &failed {
        wait_for(&h.store, id, RunStatus::Failed).await;
    }
    usage_reaches(&h.store, &acme(), |running, queued| {
        running == 0 && queued == 0
    })
    .await;
    h.stop().await;
}

/// A plan set through one control plane holds on another, which read the plans before the
/// change, once its read has aged (a second): starts there over the new payload and queue
/// ceilings are refused.
async fn a_plan_set_on_one_plane_holds_on_the_others(backend: Backend) {
    let planes = [
        backend.start(registry()).await,
        backend.start(registry()).await,
    ];
    // The second plane has read the plans (none) for a start of its own.
    let first = start(&planes[1].engine, &acme(), "hold", json!(null))
        .await
        .unwrap();
    planes[0]
        .engine
        .set_plan(
            Some(&acme()),
            Plan {
                max_payload_bytes: Some(64),
                max_queued_runs: Some(0),
                max_concurrent_runs: Some(1),
                ..Plan::default()
            },
        )
        .await
        .unwrap();
    let big = json!({ "blob": "x".repeat(100) });
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let refused = loop {
        match start(&planes[1].engine, &acme(), "hold", big.clone()).await {
            Err(EngineError::QuotaExceeded(q)) => break q,
            Ok(run) => {
                // Accepted under the plans it read before the change: let it go again.
                planes[1].engine.cancel(&Scope::All, &run.id).await.unwrap();
            }
            Err(e) => panic!("{e}"),
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the other plane never saw the new plan"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(refused.limit, Limit::MaxPayloadBytes);
    // The queue ceiling too: one run holds the one slot, and none may wait.
    match start(&planes[1].engine, &acme(), "hold", json!(null)).await {
        Err(EngineError::QuotaExceeded(QuotaExceeded {
            limit: Limit::MaxQueuedRuns,
            ..
        })) => {}
        other => panic!("no run may queue behind the one running: {other:?}"),
    }
    release_all(&planes[1], &[first.id]).await;
    for plane in planes {
        plane.stop().await;
    }
}
