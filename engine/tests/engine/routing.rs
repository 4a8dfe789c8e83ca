//! Routing: where a remote step runs. The author's explicit pool wins, then the first of the
//! tenant's routing rules that matches, else the tenant's own partition; the decision is kept
//! on the step's checkpoint.

use std::sync::Arc;

use durable::StartRun;
use durable::model::{
    CheckpointStatus, Namespace, Partition, PoolName, RoutedBy, RoutingRules, RunStatus, Scope,
    StepRoute,
};
use durable::prelude::*;
use durable::runtime::{Registry, StepOptions};
use durable::transport::Partitions;
use serde_json::{Value, json};

use crate::backend::Backend;
use crate::common::wait_for;
use crate::harness::start_worker;

engine_cases! {
    a_steps_code_sends_it_to_a_pool_of_its_tenant,
    a_pool_the_tenant_lacks_fails_the_step_until_any_plane_creates_it,
    a_rule_sends_a_step_to_a_pool_and_an_edit_reroutes_the_next,
    a_fallback_pool_is_used_only_while_the_first_has_no_live_worker,
    a_retry_is_routed_again_and_its_checkpoint_says_where_it_went,
}

/// A registry with workflow `route.open`, whose one step `where` names no pool: the tenant's
/// routing decides where it runs, and its answer is the run's output.
fn open_step() -> Registry {
    let mut registry = Registry::new();
    registry.workflow(
        "route.open",
        1,
        |ctx: WorkflowContext, _: Value| async move {
            let answer: String = ctx.step("where", &json!(null)).await?;
            Ok::<_, WorkflowError>(json!(answer))
        },
    );
    registry
}

/// A start of `workflow` in tenant `acme`.
fn in_acme(workflow: &str) -> StartRun {
    StartRun {
        workflow: workflow.into(),
        input: Value::Null,
        namespace: Some(Namespace::tenant("acme").unwrap()),
        ..Default::default()
    }
}

/// A registry whose step `where` answers `answer`: which pool's worker ran it.
fn answering(answer: &'static str) -> Registry {
    let mut registry = Registry::new();
    registry.step("where", move |_ctx: StepContext, _: Value| async move {
        Ok::<_, StepError>(answer.to_owned())
    });
    registry
}

/// A step sent to pool `gpu` by its code runs on the workers of `acme.gpu` and not on acme's
/// own, the next step without a pool on acme's own; each checkpoint says where it went and why.
/// A pool name that cannot be one fails its step, saying so.
async fn a_steps_code_sends_it_to_a_pool_of_its_tenant(backend: Backend) {
    let mut registry = Registry::new();
    registry.workflow(
        "route.pick",
        1,
        |ctx: WorkflowContext, _: Value| async move {
            let pooled: String = ctx
                .step_with("where", &json!(null), StepOptions::default().pool("gpu"))
                .await?;
            let own: String = ctx.step("where", &json!(null)).await?;
            Ok::<_, WorkflowError>(json!([pooled, own]))
        },
    );
    registry.workflow(
        "route.typo",
        1,
        |ctx: WorkflowContext, _: Value| async move {
            let _: String = ctx
                .step_with("where", &json!(null), StepOptions::default().pool("GPU!"))
                .await?;
            Ok::<_, WorkflowError>(Value::Null)
        },
    );
    let h = backend.start(registry).await;
    let acme = Namespace::tenant("acme").unwrap();
    h.engine
        .put_pool(&acme, PoolName::parse("gpu").unwrap(), Default::default())
        .await
        .unwrap();
    let on = |partition: &str| Partitions::Only(vec![Partition::parse(partition).unwrap()]);
    let transport = h.engine.transport().clone();
    let gpu = start_worker(
        Arc::new(answering("gpu")),
        transport.clone(),
        on("acme.gpu"),
        backend.clock(),
    )
    .await;
    let own = start_worker(
        Arc::new(answering("own")),
        transport,
        on("acme"),
        backend.clock(),
    )
    .await;
    let start = in_acme;
    let run = h.engine.start_run(start("route.pick")).await.unwrap();
    let done = wait_for(&h.store, &run.id, RunStatus::Completed).await;
    assert_eq!(done.output, Some(json!(["gpu", "own"])));
    let cps = h.store.checkpoints(&Scope::All, &run.id).await.unwrap();
    assert_eq!(cps[0].worker_group.as_deref(), Some("where@acme.gpu"));
    assert_eq!(
        cps[0].route,
        Some(StepRoute {
            pool: Some(PoolName::parse("gpu").unwrap()),
            by: RoutedBy::Code,
            instead_of: None,
        })
    );
    assert_eq!(cps[1].worker_group.as_deref(), Some("where@acme"));
    assert_eq!(cps[1].route, None, "nothing chose: no route is kept");
    assert!(cps.iter().all(|c| c.status == CheckpointStatus::Completed));

    let typo = h.engine.start_run(start("route.typo")).await.unwrap();
    let failed = wait_for(&h.store, &typo.id, RunStatus::Failed).await;
    let error = failed.error.expect("why it failed");
    assert!(
        error.message.contains("pool name `GPU!` is invalid"),
        "{error:?}"
    );
    for worker in [gpu, own] {
        worker.shutdown().await;
    }
    h.stop().await;
}

/// A step naming a pool its tenant does not have fails at once, saying how to create it; once
/// any control plane creates it, the next such step goes there, on this plane too: a pool it
/// has not seen yet is looked for in the store before a step is refused.
async fn a_pool_the_tenant_lacks_fails_the_step_until_any_plane_creates_it(backend: Backend) {
    let mut registry = Registry::new();
    registry.workflow(
        "route.late",
        1,
        |ctx: WorkflowContext, _: Value| async move {
            let answer: String = ctx
                .step_with("where", &json!(null), StepOptions::default().pool("late"))
                .await?;
            Ok::<_, WorkflowError>(json!(answer))
        },
    );
    let h = backend.start(registry).await;
    let acme = Namespace::tenant("acme").unwrap();
    let late = start_worker(
        Arc::new(answering("late")),
        h.engine.transport().clone(),
        Partitions::Only(vec![Partition::parse("acme.late").unwrap()]),
        backend.clock(),
    )
    .await;
    let start = || in_acme("route.late");
    let refused = h.engine.start_run(start()).await.unwrap();
    let failed = wait_for(&h.store, &refused.id, RunStatus::Failed).await;
    let error = failed.error.expect("why");
    assert!(
        error.message.contains("does not have") && error.message.contains("durable pool put"),
        "{error:?}"
    );
    let cps = h.store.checkpoints(&Scope::All, &refused.id).await.unwrap();
    assert_eq!(
        cps[0].error.as_ref().and_then(|e| e.code.as_deref()),
        Some("unknown_pool")
    );

    // Another control plane creates it; this one sends the next step there at once.
    let peer = backend.peer().await;
    peer.put_pool(&acme, PoolName::parse("late").unwrap(), Default::default())
        .await
        .unwrap();
    let run = h.engine.start_run(start()).await.unwrap();
    let done = wait_for(&h.store, &run.id, RunStatus::Completed).await;
    assert_eq!(done.output, Some(json!("late")));
    late.shutdown().await;
    peer.shutdown().await;
    h.stop().await;
}

/// A rule sends a step its code leaves open to pool `gpu` at the priority it gives (capped by
/// the tenant's plan), and the checkpoint says which rule of which version did; the tenant
/// replaces its rules and the next run's step goes where the new list says (a refused list
/// changes nothing, and a pool a rule names cannot be deleted).
async fn a_rule_sends_a_step_to_a_pool_and_an_edit_reroutes_the_next(backend: Backend) {
    let h = backend.start(open_step()).await;
    let acme = Namespace::tenant("acme").unwrap();
    let gpu = PoolName::parse("gpu").unwrap();
    h.engine
        .put_pool(&acme, gpu.clone(), Default::default())
        .await
        .unwrap();
    let transport = h.engine.transport().clone();
    let on = |partition: &str| Partitions::Only(vec![Partition::parse(partition).unwrap()]);
    let workers = [
        start_worker(
            Arc::new(answering("gpu")),
            transport.clone(),
            on("acme.gpu"),
            backend.clock(),
        )
        .await,
        start_worker(
            Arc::new(answering("own")),
            transport,
            on("acme"),
            backend.clock(),
        )
        .await,
    ];
    let rules =
        |raw: Value| serde_json::from_value::<RoutingRules>(json!({ "rules": raw })).unwrap();
    let refused = h
        .engine
        .put_routing_rules(
            &acme,
            rules(json!([{"match": {"step": "where"}, "pool": "gpu"}])),
        )
        .await
        .expect_err("no catch-all");
    assert!(
        refused.to_string().contains("must match everything"),
        "{refused}"
    );
    // The rule asks for priority 10; the tenant's plan caps it at 5.
    h.engine
        .set_plan(
            Some(&acme),
            durable::model::Plan {
                max_priority: Some(5),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let version = h
        .engine
        .put_routing_rules(
            &acme,
            rules(json!([
                {"match": {"step": "where"}, "pool": "gpu", "priority": 10},
                {"match": {}, "pool": "default"},
            ])),
        )
        .await
        .unwrap();
    let in_use = h
        .engine
        .delete_pool(&acme, &gpu)
        .await
        .expect_err("named by a rule");
    assert!(in_use.to_string().contains("routing rule 1"), "{in_use}");
    let start = || in_acme("route.open");
    let run = h.engine.start_run(start()).await.unwrap();
    let done = wait_for(&h.store, &run.id, RunStatus::Completed).await;
    assert_eq!(done.output, Some(json!("gpu")));
    let cps = h.store.checkpoints(&Scope::All, &run.id).await.unwrap();
    assert_eq!(cps[0].worker_group.as_deref(), Some("where@acme.gpu"));
    let route = cps[0].route.clone().expect("a rule chose");
    assert_eq!(route.by, RoutedBy::Rule { rule: 1, version });
    assert_eq!(route.to_string(), "routed to gpu by rule 1");
    assert_eq!(
        cps[0].priority,
        Some(5),
        "the rule's priority, capped by the plan"
    );

    h.engine
        .put_routing_rules(&acme, rules(json!([{"match": {}, "pool": "default"}])))
        .await
        .unwrap();
    let next = h.engine.start_run(start()).await.unwrap();
    let done = wait_for(&h.store, &next.id, RunStatus::Completed).await;
    assert_eq!(
        done.output,
        Some(json!("own")),
        "the edit rerouted the next step"
    );
    for worker in workers {
        worker.shutdown().await;
    }
    h.stop().await;
}

/// A rule's fallback pool takes the step only while the rule's pool has no live worker: the
/// checkpoint says which pool it stood in for. Once a worker serves the first pool, the next
/// step goes there.
async fn a_fallback_pool_is_used_only_while_the_first_has_no_live_worker(backend: Backend) {
    let h = backend.start(open_step()).await;
    let acme = Namespace::tenant("acme").unwrap();
    let (gpu, spare) = (
        PoolName::parse("gpu").unwrap(),
        PoolName::parse("gpu-b").unwrap(),
    );
    for pool in [&gpu, &spare] {
        h.engine
            .put_pool(&acme, pool.clone(), Default::default())
            .await
            .unwrap();
    }
    let rules = serde_json::from_value::<RoutingRules>(json!({"rules": [
        {"match": {"step": "where"}, "pool": "gpu", "fallback": ["gpu-b"]},
        {"match": {}, "pool": "default"},
    ]}))
    .unwrap();
    let version = h.engine.put_routing_rules(&acme, rules).await.unwrap();
    let transport = h.engine.transport().clone();
    let on = |partition: &str| Partitions::Only(vec![Partition::parse(partition).unwrap()]);
    let standby = start_worker(
        Arc::new(answering("gpu-b")),
        transport.clone(),
        on("acme.gpu-b"),
        backend.clock(),
    )
    .await;
    until_live(&transport, "where@acme.gpu-b").await;
    let start = || in_acme("route.open");
    let run = h.engine.start_run(start()).await.unwrap();
    let done = wait_for(&h.store, &run.id, RunStatus::Completed).await;
    assert_eq!(done.output, Some(json!("gpu-b")), "nobody serves gpu yet");
    let cps = h.store.checkpoints(&Scope::All, &run.id).await.unwrap();
    assert_eq!(cps[0].worker_group.as_deref(), Some("where@acme.gpu-b"));
    let route = cps[0].route.clone().expect("routed");
    assert_eq!(
        route,
        StepRoute {
            pool: Some(spare.clone()),
            by: RoutedBy::Rule { rule: 1, version },
            instead_of: Some(gpu.clone()),
        }
    );
    assert_eq!(
        route.to_string(),
        "routed to gpu-b by rule 1 (gpu had no live worker)"
    );

    let first = start_worker(
        Arc::new(answering("gpu")),
        transport.clone(),
        on("acme.gpu"),
        backend.clock(),
    )
    .await;
    until_live(&transport, "where@acme.gpu").await;
    let run = h.engine.start_run(start()).await.unwrap();
    let done = wait_for(&h.store, &run.id, RunStatus::Completed).await;
    assert_eq!(done.output, Some(json!("gpu")), "the first pool is back");
    let cps = h.store.checkpoints(&Scope::All, &run.id).await.unwrap();
    assert_eq!(
        cps[0].route.as_ref().and_then(|r| r.instead_of.clone()),
        None
    );
    for worker in [standby, first] {
        worker.shutdown().await;
    }
    h.stop().await;
}

/// Waits until the control plane's `transport` has heard a worker on `token` announce itself
/// (on Redis, a moment after it starts).
async fn until_live(transport: &Arc<dyn durable::transport::Transport>, token: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while transport
        .worker_descriptors(token)
        .await
        .unwrap()
        .is_empty()
    {
        assert!(
            std::time::Instant::now() < deadline,
            "no worker on {token} ever showed"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// A step's retry is routed again: a rule edited between its tries sends the retry to the new
/// pool, and its checkpoint names where the retry went and which rule of which version sent it.
async fn a_retry_is_routed_again_and_its_checkpoint_says_where_it_went(backend: Backend) {
    let h = backend.start(open_step()).await;
    let acme = Namespace::tenant("acme").unwrap();
    for pool in ["gpu", "cpu"] {
        h.engine
            .put_pool(&acme, PoolName::parse(pool).unwrap(), Default::default())
            .await
            .unwrap();
    }
    let rules = |pool: &str| {
        serde_json::from_value::<RoutingRules>(json!({"rules": [
            {"match": {"step": "where"}, "pool": pool},
            {"match": {}, "pool": "default"},
        ]}))
        .unwrap()
    };
    h.engine
        .put_routing_rules(&acme, rules("gpu"))
        .await
        .unwrap();
    // gpu's worker moves the step to cpu, then fails its try: the retry goes by the new rule.
    let mut failing = Registry::new();
    let (engine, tenant) = (h.engine.clone(), acme.clone());
    failing.step("where", move |_ctx: StepContext, _: Value| {
        let (engine, tenant) = (engine.clone(), tenant.clone());
        async move {
            engine
                .put_routing_rules(&tenant, rules("cpu"))
                .await
                .unwrap();
            Err::<String, _>(StepError::retryable("gpu is out of memory"))
        }
    });
    let transport = h.engine.transport().clone();
    let on = |partition: &str| Partitions::Only(vec![Partition::parse(partition).unwrap()]);
    let workers = [
        start_worker(
            Arc::new(failing),
            transport.clone(),
            on("acme.gpu"),
            backend.clock(),
        )
        .await,
        start_worker(
            Arc::new(answering("cpu")),
            transport,
            on("acme.cpu"),
            backend.clock(),
        )
        .await,
    ];
    let run = h.engine.start_run(in_acme("route.open")).await.unwrap();
    let done = wait_for(&h.store, &run.id, RunStatus::Completed).await;
    assert_eq!(done.output, Some(json!("cpu")));
    let cps = h.store.checkpoints(&Scope::All, &run.id).await.unwrap();
    assert_eq!(cps[0].attempts, 2);
    assert_eq!(cps[0].worker_group.as_deref(), Some("where@acme.cpu"));
    let route = cps[0].route.clone().expect("a rule chose");
    assert_eq!(route.pool, Some(PoolName::parse("cpu").unwrap()));
    let (_, version) = h.engine.routing_rules(&acme).await.unwrap();
    assert_eq!(route.by, RoutedBy::Rule { rule: 1, version });
    for worker in workers {
        worker.shutdown().await;
    }
    h.stop().await;
}
