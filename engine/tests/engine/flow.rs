//! Flow control authors declare: a workflow's concurrency limit per key holds (also with three
//! control planes racing), a queued run starts by itself in the order it came when its key frees,
//! a key at its limit holds back none of the tenant's other keys, and a step's rate limit spaces
//! its dispatches per key, parking the run `blocked` with the reason meanwhile; a step's
//! concurrency limit keeps at most N of its dispatches out per key, the others parked until a
//! result frees a slot.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use durable::model::{Namespace, Run, RunId, RunStatus, Scope};
use durable::prelude::*;
use durable::runtime::Clock;
use durable::store::Store;
use durable::{EngineError, StartRun};
use serde_json::{Value, json};

use crate::backend::Backend;
use crate::common::wait_for;

engine_cases! {
    a_workflow_runs_at_most_its_limit_per_key,
    three_control_planes_racing_never_pass_a_key_limit,
    a_key_at_its_limit_holds_back_none_of_the_tenants_other_keys,
    a_step_rate_limit_spaces_its_dispatches_per_key,
    a_step_has_at_most_its_concurrency_limit_out_per_key,
    a_step_slot_comes_back_on_cancel_and_when_its_lease_ends,
}

fn acme() -> Namespace {
    Namespace::tenant("acme").unwrap()
}

/// `charge` waits for a `go` signal, then completes; at most `limit` per customer run at once.
fn registry(limit: u32) -> Registry {
    let mut r = Registry::new();
    r.workflow("charge", 1, |ctx: WorkflowContext, _: Value| async move {
        let _: Option<Value> = ctx.wait_signal("go", None).await?;
        Ok::<_, WorkflowError>(json!("charged"))
    });
    r.limit_concurrency("charge", Concurrency::at_most(limit).per("/customer"));
    r
}

async fn charge(engine: &Engine, customer: &str) -> Result<Run, EngineError> {
    charge_as(engine, acme(), customer).await
}

async fn charge_as(engine: &Engine, tenant: Namespace, customer: &str) -> Result<Run, EngineError> {
    engine
        .start_run(StartRun {
            workflow: "charge".into(),
            input: json!({ "customer": customer }),
            namespace: Some(tenant),
            ..Default::default()
        })
        .await
}

async fn status(store: &Arc<dyn Store>, id: &RunId) -> RunStatus {
    store
        .get_run(&Scope::All, id)
        .await
        .unwrap()
        .expect("the run")
        .status
}

/// How many of acme's `charge` runs for `customer` are started and not ended.
async fn running(store: &Arc<dyn Store>, customer: &str) -> u64 {
    store
        .started_with_key(&acme(), "charge", customer)
        .await
        .unwrap()
}

async fn finish(engine: &Engine, store: &Arc<dyn Store>, id: &RunId) {
    engine
        .signal(&Scope::All, id, "go", json!(null))
        .await
        .unwrap();
    wait_for(store, id, RunStatus::Completed).await;
}

async fn a_workflow_runs_at_most_its_limit_per_key(backend: Backend) {
    let h = backend.start(registry(1)).await;
    let mut alice = Vec::new();
    for _ in 0..3 {
        alice.push(charge(&h.engine, "alice").await.unwrap().id);
    }
    let bob = charge(&h.engine, "bob").await.unwrap().id;
    // Another key is not held by alice's: bob's runs at once beside alice's first.
    wait_for(&h.store, &alice[0], RunStatus::Suspended).await;
    wait_for(&h.store, &bob, RunStatus::Suspended).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(status(&h.store, &alice[1]).await, RunStatus::Pending);
    assert_eq!(status(&h.store, &alice[2]).await, RunStatus::Pending);
    assert_eq!(running(&h.store, "alice").await, 1);
    let queued = h
        .store
        .get_run(&Scope::All, &alice[1])
        .await
        .unwrap()
        .unwrap();
    let slot = queued.concurrency.expect("the run keeps its slot");
    assert_eq!((slot.key.as_str(), slot.limit), ("alice", 1));
    // The key is the tenant's own: another tenant's `alice` is not held by acme's.
    let globex = Namespace::tenant("globex").unwrap();
    let other = charge_as(&h.engine, globex, "alice").await.unwrap().id;
    wait_for(&h.store, &other, RunStatus::Suspended).await;

    // A start whose input lacks the key is refused, naming it.
    let err = h
        .engine
        .start_run(StartRun {
            workflow: "charge".into(),
            input: json!({ "amount": 5 }),
            namespace: Some(acme()),
            ..Default::default()
        })
        .await
        .expect_err("no customer");
    assert!(
        matches!(&err, EngineError::BadInput(m) if m.contains("/customer")),
        "{err}"
    );

    // Alice's first ends: her second starts by itself (the one that came first), then her third.
    finish(&h.engine, &h.store, &alice[0]).await;
    wait_for(&h.store, &alice[1], RunStatus::Suspended).await;
    assert_eq!(status(&h.store, &alice[2]).await, RunStatus::Pending);
    finish(&h.engine, &h.store, &alice[1]).await;
    wait_for(&h.store, &alice[2], RunStatus::Suspended).await;
    // A cancel gives the slot back too.
    let fourth = charge(&h.engine, "alice").await.unwrap().id;
    h.engine.cancel(&Scope::All, &alice[2]).await.unwrap();
    wait_for(&h.store, &fourth, RunStatus::Suspended).await;
    finish(&h.engine, &h.store, &fourth).await;
    finish(&h.engine, &h.store, &bob).await;
    finish(&h.engine, &h.store, &other).await;
    assert_eq!(running(&h.store, "alice").await, 0);
    assert_eq!(running(&h.store, "bob").await, 0);
    h.stop().await;
}

async fn three_control_planes_racing_never_pass_a_key_limit(backend: Backend) {
    let planes = [
        backend.start(registry(2)).await,
        backend.start(registry(2)).await,
        backend.start(registry(2)).await,
    ];
    let mut ids = Vec::new();
    for i in 0..12 {
        ids.push(charge(&planes[i % 3].engine, "alice").await.unwrap().id);
    }
    let store = &planes[0].store;
    let mut done = 0;
    while done < ids.len() {
        let now = running(store, "alice").await;
        assert!(
            now <= 2,
            "{now} of alice's charges ran at once, over the limit of 2"
        );
        let mut released = false;
        for id in &ids {
            if status(store, id).await == RunStatus::Suspended {
                finish(&planes[done % 3].engine, store, id).await;
                done += 1;
                released = true;
                break;
            }
        }
        if !released {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    assert_eq!(running(store, "alice").await, 0);
    for plane in planes {
        plane.stop().await;
    }
}

async fn a_key_at_its_limit_holds_back_none_of_the_tenants_other_keys(backend: Backend) {
    // One turn slot: the claim then reads only the first 16 of a tenant's waiting runs, which
    // the held runs (one per customer, all due before the newcomer) would fill if they were read.
    let config = EngineConfig {
        max_concurrent_turns: 1,
        ..EngineConfig::default()
    };
    let h = backend
        .start_with(backend.store().await, registry(1), config)
        .await;
    // Forty customers, each with one charge running and two queued behind it.
    let mut firsts = Vec::new();
    for c in 0..40 {
        for k in 0..3 {
            let id = charge(&h.engine, &format!("c{c}")).await.unwrap().id;
            if k == 0 {
                firsts.push(id);
            }
        }
    }
    for id in &firsts {
        wait_for(&h.store, id, RunStatus::Suspended).await;
    }
    // A new customer's charge starts: the eighty queued runs, all held by their keys, take
    // none of the places the claim reads (read, each would be refused, round after round, and
    // the newcomer, due last, would never be read).
    let newcomer = charge(&h.engine, "newcomer").await.unwrap().id;
    wait_for(&h.store, &newcomer, RunStatus::Suspended).await;
    let usage = h
        .store
        .usage(&acme(), durable::runtime::SystemClock.now())
        .await
        .unwrap();
    assert_eq!((usage.running, usage.queued), (41, 80));
    h.stop().await;
}

async fn a_step_rate_limit_spaces_its_dispatches_per_key(mut backend: Backend) {
    let clock = backend.test_clock();
    let mut r = Registry::new();
    r.step("ping", |_ctx: StepContext, input: Value| async move {
        Ok::<_, StepError>(input)
    });
    r.workflow(
        "pings",
        1,
        |ctx: WorkflowContext, input: Value| async move {
            let account = input["account"].clone();
            let n = input["n"].as_u64().unwrap_or(0);
            let limited =
                StepOptions::default().rate_limit(RateLimit::per_minute(2).per("/account"));
            for i in 0..n {
                let _: Value = ctx
                    .step_with(
                        "ping",
                        &json!({ "account": account, "i": i }),
                        limited.clone(),
                    )
                    .await?;
            }
            Ok::<_, WorkflowError>(json!(n))
        },
    );
    let h = backend.start(r).await;
    let a = h
        .start_run("pings", json!({ "account": "a", "n": 3 }))
        .await;
    // Two a minute for account `a`: the third call waits, the run parked with the reason.
    let parked = wait_for(&h.store, &a.id, RunStatus::Blocked).await;
    let reason = parked.error.expect("a reason");
    assert_eq!(reason.code.as_deref(), Some("rate_limited"));
    assert!(reason.message.contains("2 a minute"), "{}", reason.message);
    assert!(reason.message.contains("`a`"), "{}", reason.message);
    // Another account has its own allowance.
    let b = h
        .start_run("pings", json!({ "account": "b", "n": 2 }))
        .await;
    wait_for(&h.store, &b.id, RunStatus::Completed).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(status(&h.store, &a.id).await, RunStatus::Blocked);
    // Half a minute later one is free again: the third call goes and the run completes.
    clock.advance(Duration::from_secs(31));
    let done = wait_for(&h.store, &a.id, RunStatus::Completed).await;
    assert_eq!(done.output, Some(json!(3)));
    h.stop().await;
}

async fn a_step_has_at_most_its_concurrency_limit_out_per_key(mut backend: Backend) {
    // Engine time stands still: no recheck ever comes due, so only a freed slot moves a run on.
    let _clock = backend.test_clock();
    // Per account: how many `call` tries run now, and the most that ever ran at once.
    let seen: Arc<Mutex<HashMap<String, (u32, u32)>>> = Arc::default();
    let mut r = Registry::new();
    let tally = seen.clone();
    r.step("call", move |_ctx: StepContext, input: Value| {
        let tally = tally.clone();
        async move {
            let account = input["account"].as_str().unwrap_or_default().to_owned();
            {
                let mut all = tally.lock().unwrap();
                let (now, most) = all.entry(account.clone()).or_default();
                *now += 1;
                *most = (*most).max(*now);
            }
            tokio::time::sleep(Duration::from_millis(150)).await;
            tally.lock().unwrap().entry(account).or_default().0 -= 1;
            Ok::<_, StepError>(input)
        }
    });
    r.workflow(
        "calls",
        1,
        |ctx: WorkflowContext, input: Value| async move {
            let one_at_a_time =
                StepOptions::default().concurrency(Concurrency::at_most(1).per("/account"));
            let out: Value = ctx.step_with("call", &input, one_at_a_time).await?;
            Ok::<_, WorkflowError>(out)
        },
    );
    let h = backend.start(r).await;
    let mut runs = Vec::new();
    for (i, account) in ["a", "a", "a", "a", "b", "b"].into_iter().enumerate() {
        let run = h
            .start_run("calls", json!({ "account": account, "i": i }))
            .await;
        runs.push(run.id);
    }
    // While one call of account `a` is out, the others wait parked, saying why.
    let mut parked = None;
    for _ in 0..200 {
        for id in &runs[..4] {
            let run = h
                .store
                .get_run(&Scope::All, id)
                .await
                .unwrap()
                .expect("run");
            if run.status == RunStatus::Blocked {
                parked = run.error;
            }
        }
        if parked.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let reason = parked.expect("a run waits for a slot");
    assert_eq!(reason.code.as_deref(), Some("concurrency_limited"));
    assert!(
        reason
            .message
            .contains("1 dispatch out at once for key `a`"),
        "{}",
        reason.message
    );
    // Each freed slot wakes the next run waiting for one.
    for id in &runs {
        wait_for(&h.store, id, RunStatus::Completed).await;
    }
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen["a"], (0, 1), "one call of account `a` at a time");
    assert_eq!(seen["b"], (0, 1), "one call of account `b` at a time");
    h.stop().await;
}

async fn a_step_slot_comes_back_on_cancel_and_when_its_lease_ends(mut backend: Backend) {
    let clock = backend.test_clock();
    let mut r = Registry::new();
    // A `stuck` call ends only when the case opens the gate, at its end.
    let gate = Arc::new(tokio::sync::Notify::new());
    let stuck_on = gate.clone();
    r.step("call", move |_ctx: StepContext, input: Value| {
        let gate = stuck_on.clone();
        async move {
            if input["stuck"] == json!(true) {
                gate.notified().await;
            }
            Ok::<_, StepError>(input)
        }
    });
    r.workflow(
        "calls",
        1,
        |ctx: WorkflowContext, input: Value| async move {
            let mut options = StepOptions::from(RetryPolicy::none())
                .concurrency(Concurrency::at_most(1).per("/account"));
            if input["timeout"] == json!(true) {
                options = options.timeout(Duration::from_secs(1));
            }
            let out: Value = ctx.step_with("call", &input, options).await?;
            Ok::<_, WorkflowError>(out)
        },
    );
    let h = backend.start(r).await;
    let start = |input: Value| h.start_run("calls", input);
    // Cancelling a run gives back the slots of its steps still out at once: engine time stands
    // still, so no lease ends and no recheck comes due meanwhile.
    let stuck = start(json!({ "account": "a", "stuck": true })).await;
    wait_for(&h.store, &stuck.id, RunStatus::Suspended).await;
    let next = start(json!({ "account": "a" })).await;
    wait_for(&h.store, &next.id, RunStatus::Blocked).await;
    h.engine.cancel(&Scope::All, &stuck.id).await.unwrap();
    let done = wait_for(&h.store, &next.id, RunStatus::Completed).await;
    assert_eq!(done.output, Some(json!({ "account": "a" })));
    // A call that timed out may still run on its worker: its slot stays taken until its lease,
    // no longer renewed, runs out.
    let timed_out = start(json!({ "account": "b", "stuck": true, "timeout": true })).await;
    wait_for(&h.store, &timed_out.id, RunStatus::Suspended).await;
    let after = start(json!({ "account": "b" })).await;
    wait_for(&h.store, &after.id, RunStatus::Blocked).await;
    clock.advance(Duration::from_secs(2));
    wait_for(&h.store, &timed_out.id, RunStatus::Failed).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(status(&h.store, &after.id).await, RunStatus::Blocked);
    clock.advance(Duration::from_secs(40));
    wait_for(&h.store, &after.id, RunStatus::Completed).await;
    gate.notify_waiters();
    h.stop().await;
}
