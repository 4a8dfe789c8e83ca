//! Fairness between tenants where runs wait for turn slots: a tenant with a backlog spread over
//! many workflows does not hold back a tenant with a handful, and weights split the slots in
//! their ratio, on one control plane and across three sharing a store (each picks fairly from
//! the same ranked read, so their splits add up to the weights' without shared pick state).
//! A tenant whose starts take slots directly leaves a slot that frees to a tenant waiting below
//! its share. Ordering and counts only; no timing.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use durable::model::{Namespace, Plan, RunId, RunStatus};
use durable::prelude::*;
use durable::runtime::{Worker, WorkerConfig};
use durable::store::NewRun;
use durable::transport::Partitions;
use durable::{EngineConfig, StartRun};
use serde_json::{Value, json};

use crate::backend::Backend;
use crate::common::wait_for;
use crate::harness::Harness;

engine_cases! {
    a_handful_is_not_held_back_by_a_backlog_over_many_workflows,
    weights_split_the_turn_slots_in_their_ratio,
    a_three_two_one_split_holds_across_three_control_planes,
    a_tenant_at_its_share_leaves_a_freed_slot_to_a_waiting_tenant;
    // The in-process transport's inbox keeps the headroom; a Redis worker takes what its
    // tenant pools' queues hold.
    embedded_only: a_newcomers_step_finds_a_slot_a_busy_tenant_cannot_fill,
}

/// Runs that finished, by tenant, in the order they did.
#[derive(Default)]
struct Finished(Mutex<HashMap<String, u32>>, AtomicU32);

impl Finished {
    fn note(&self, tenant: &str) -> u32 {
        *self.0.lock().unwrap().entry(tenant.to_owned()).or_default() += 1;
        self.1.fetch_add(1, Ordering::SeqCst) + 1
    }

    fn of(&self, tenant: &str) -> u32 {
        self.0.lock().unwrap().get(tenant).copied().unwrap_or(0)
    }
}

/// `w0` … `w49`: one turn each, which notes its tenant.
fn registry(finished: Arc<Finished>) -> Registry {
    let mut r = Registry::new();
    for w in 0..50 {
        let finished = finished.clone();
        r.workflow(
            &format!("w{w}"),
            1,
            move |ctx: WorkflowContext, _: Value| {
                let finished = finished.clone();
                async move {
                    finished.note(ctx.namespace().as_str());
                    Ok::<_, WorkflowError>(json!(null))
                }
            },
        );
    }
    r
}

/// A process with one turn slot, so runs queue for it.
async fn one_slot(backend: &Backend, finished: Arc<Finished>) -> Harness {
    let config = EngineConfig {
        max_concurrent_turns: 1,
        ..EngineConfig::default()
    };
    backend
        .start_with(backend.store().await, registry(finished), config)
        .await
}

/// A start of `workflow` for `tenant`, with no input.
fn start(tenant: &Namespace, workflow: &str) -> StartRun {
    StartRun {
        workflow: workflow.into(),
        input: json!(null),
        namespace: Some(tenant.clone()),
        ..Default::default()
    }
}

/// Waits until `holding` counts `n` steps or turns held, failing with `never` after 10 s.
async fn until_holding(holding: &AtomicU32, n: u32, never: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while holding.load(Ordering::SeqCst) < n {
        assert!(std::time::Instant::now() < deadline, "{never}");
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}

/// Queues `n` runs of `tenant` over `workflows` workflows, straight into the store (as if
/// started before the process came up).
async fn backlog(backend: &Backend, tenant: &Namespace, n: usize, workflows: usize) {
    let store = backend.store().await;
    let now = backend.clock().now();
    for i in 0..n {
        let id = RunId::parse(&format!("{tenant}-{i}")).unwrap();
        let run = NewRun::top_level(
            id,
            tenant.clone(),
            format!("w{}", i % workflows),
            1,
            json!(null),
        );
        store.create_run(run, now, None).await.unwrap();
    }
}

async fn a_handful_is_not_held_back_by_a_backlog_over_many_workflows(backend: Backend) {
    let acme = Namespace::tenant("acme").unwrap();
    let globex = Namespace::tenant("globex").unwrap();
    backlog(&backend, &acme, 1_000, 50).await;
    let finished = Arc::new(Finished::default());
    let h = one_slot(&backend, finished.clone()).await;
    let mut handful = Vec::new();
    let before = finished.of("acme");
    for _ in 0..3 {
        let run = h.engine.start_run(start(&globex, "w0")).await.unwrap();
        handful.push(run.id);
    }
    for id in &handful {
        wait_for(&h.store, id, RunStatus::Completed).await;
    }
    let meanwhile = finished.of("acme") - before;
    // First come, first served, globex would wait for all of acme's 1,000 (older) runs; fairly,
    // its three alternate with acme's.
    assert!(
        meanwhile < 200,
        "acme finished {meanwhile} runs while globex's three waited"
    );
    h.stop().await;
}

async fn weights_split_the_turn_slots_in_their_ratio(backend: Backend) {
    let acme = Namespace::tenant("acme").unwrap();
    let globex = Namespace::tenant("globex").unwrap();
    let store = backend.store().await;
    let now = backend.clock().now();
    for (tenant, weight) in [(&acme, 3), (&globex, 1)] {
        let plan = Plan {
            weight: Some(weight),
            ..Plan::default()
        };
        store.put_plan(Some(tenant), &plan, now).await.unwrap();
    }
    backlog(&backend, &acme, 600, 7).await;
    backlog(&backend, &globex, 600, 1).await;
    let finished = Arc::new(Finished::default());
    let h = one_slot(&backend, finished.clone()).await;
    // Sample the split while both still have work: after 400 turns, neither drained.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while finished.1.load(Ordering::SeqCst) < 400 {
        assert!(
            std::time::Instant::now() < deadline,
            "400 runs never finished"
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let (a, g) = (finished.of("acme") as f64, finished.of("globex") as f64);
    let share = a / (a + g);
    assert!(
        (0.75 * 0.9..=0.75 * 1.1).contains(&share),
        "acme (weight 3) had {a} turns to globex's (weight 1) {g}: a share of {share:.2}, not 0.75 ± 10%"
    );
    h.stop().await;
}

async fn a_three_two_one_split_holds_across_three_control_planes(backend: Backend) {
    let tenants = [("acme", 3u32), ("globex", 2), ("initech", 1)];
    let store = backend.store().await;
    let now = backend.clock().now();
    for (tenant, weight) in tenants {
        let tenant = Namespace::tenant(tenant).unwrap();
        let plan = Plan {
            weight: Some(weight),
            ..Plan::default()
        };
        store.put_plan(Some(&tenant), &plan, now).await.unwrap();
        backlog(&backend, &tenant, 700, 5).await;
    }
    let finished = Arc::new(Finished::default());
    let planes = [
        one_slot(&backend, finished.clone()).await,
        one_slot(&backend, finished.clone()).await,
        one_slot(&backend, finished.clone()).await,
    ];
    // Sample while every tenant still has work: after 600 turns initech (a sixth) has had
    // about 100 of its 700.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while finished.1.load(Ordering::SeqCst) < 600 {
        assert!(
            std::time::Instant::now() < deadline,
            "600 runs never finished"
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let counts: Vec<f64> = tenants
        .iter()
        .map(|(t, _)| f64::from(finished.of(t)))
        .collect();
    let total: f64 = counts.iter().sum();
    for ((tenant, weight), n) in tenants.iter().zip(&counts) {
        let want = f64::from(*weight) / 6.0;
        let share = n / total;
        assert!(
            (want * 0.9..=want * 1.1).contains(&share),
            "{tenant} (weight {weight}) had {n} of {total} turns: a share of {share:.3}, not {want:.3} ± 10% ({counts:?})"
        );
    }
    for plane in planes {
        plane.stop().await;
    }
}

/// `hold`: a local step that waits for a permit of `gate`, holding its turn slot meanwhile
/// (and counting in `holding` once it waits); `quick`: done at once.
fn gated(gate: Arc<tokio::sync::Semaphore>, holding: Arc<AtomicU32>) -> Registry {
    let mut r = Registry::new();
    r.workflow("hold", 1, move |ctx: WorkflowContext, _: Value| {
        let (gate, holding) = (gate.clone(), holding.clone());
        async move {
            ctx.local_step("wait", || async move {
                holding.fetch_add(1, Ordering::SeqCst);
                gate.acquire().await.expect("gate open").forget();
                Ok(())
            })
            .await?;
            Ok::<_, WorkflowError>(json!(null))
        }
    });
    r.workflow("quick", 1, |_: WorkflowContext, _: Value| async move {
        Ok::<_, WorkflowError>(json!(null))
    });
    r
}

async fn a_tenant_at_its_share_leaves_a_freed_slot_to_a_waiting_tenant(backend: Backend) {
    let acme = Namespace::tenant("acme").unwrap();
    let globex = Namespace::tenant("globex").unwrap();
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let holding = Arc::new(AtomicU32::new(0));
    let config = EngineConfig {
        max_concurrent_turns: 2,
        ..EngineConfig::default()
    };
    let h = backend
        .start_with(
            backend.store().await,
            gated(gate.clone(), holding.clone()),
            config,
        )
        .await;
    // Alone, acme takes both slots directly.
    for _ in 0..2 {
        h.engine.start_run(start(&acme, "hold")).await.unwrap();
    }
    until_holding(&holding, 2, "acme never held both slots").await;
    // Globex's run finds no slot and waits for the claim loop.
    let quick = h.engine.start_run(start(&globex, "quick")).await.unwrap();
    // Acme keeps starting runs that would hold any slot they get (four clients without a
    // pause), while one of its two runs ends.
    let mut starting = tokio::task::JoinSet::new();
    for _ in 0..4 {
        let (engine, acme) = (h.engine.clone(), acme.clone());
        starting.spawn(async move {
            for _ in 0..250 {
                engine.start_run(start(&acme, "hold")).await.unwrap();
            }
        });
    }
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    gate.add_permits(1);
    // First come, first served, acme's next start takes the freed slot and globex waits for
    // as long as acme's runs hold theirs (here, until the gate opens for all).
    wait_for(&h.store, &quick.id, RunStatus::Completed).await;
    starting.abort_all();
    gate.add_permits(10_000);
    h.stop().await;
}

/// `slow`: a step that waits for a permit of `gate` (counted in `holding` once it waits), in a
/// workflow of one such step; `quick`: a workflow of one step that is done at once.
fn slow_steps(gate: Arc<tokio::sync::Semaphore>, holding: Arc<AtomicU32>) -> Registry {
    let mut r = Registry::new();
    r.step("slow", move |_ctx: StepContext, input: Value| {
        let (gate, holding) = (gate.clone(), holding.clone());
        async move {
            holding.fetch_add(1, Ordering::SeqCst);
            gate.acquire().await.expect("gate open").forget();
            Ok::<_, StepError>(input)
        }
    });
    r.step("now", |_ctx: StepContext, input: Value| async move {
        Ok::<_, StepError>(input)
    });
    r.workflow("slow", 1, |ctx: WorkflowContext, input: Value| async move {
        let out: Value = ctx.step("slow", &input).await?;
        Ok::<_, WorkflowError>(out)
    });
    r.workflow(
        "quick",
        1,
        |ctx: WorkflowContext, input: Value| async move {
            let out: Value = ctx.step("now", &input).await?;
            Ok::<_, WorkflowError>(out)
        },
    );
    r
}

/// The in-process worker shared by every tenant: while acme's steps that never end fill all
/// the slots they may, globex's step still finds one (the headroom a shared worker keeps for
/// tenants running nothing there), and acme does not get it.
async fn a_newcomers_step_finds_a_slot_a_busy_tenant_cannot_fill(backend: Backend) {
    let acme = Namespace::tenant("acme").unwrap();
    let globex = Namespace::tenant("globex").unwrap();
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let holding = Arc::new(AtomicU32::new(0));
    let registry = Arc::new(slow_steps(gate.clone(), holding.clone()));
    let (store, transport) = (backend.store().await, backend.transport().await);
    let engine = backend.engine(
        store.clone(),
        transport.clone(),
        registry.clone(),
        EngineConfig::default(),
    );
    engine.start().await.unwrap();
    let worker = Worker::start(
        registry,
        transport,
        backend.clock(),
        WorkerConfig {
            partitions: Partitions::All,
            concurrency: 32,
            connections: None,
        },
    )
    .await
    .unwrap();
    for _ in 0..40 {
        engine.start_run(start(&acme, "slow")).await.unwrap();
    }
    // 31 of the 32 slots: the last is headroom.
    until_holding(&holding, 31, "acme's steps never filled the worker").await;
    let quick = engine.start_run(start(&globex, "quick")).await.unwrap();
    wait_for(&store, &quick.id, RunStatus::Completed).await;
    // Time for a wrong hand-out to show; its absence proves nothing more.
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    assert_eq!(
        holding.load(Ordering::SeqCst),
        31,
        "acme took the slot globex gave back"
    );
    gate.add_permits(10_000);
    worker.shutdown().await;
    engine.shutdown().await;
}
