//! Routing: where a remote step runs. The author's explicit pool wins, else the tenant's own
//! partition; the decision is kept on the step's checkpoint.

use std::sync::Arc;

use durable::StartRun;
use durable::model::{
    CheckpointStatus, Namespace, Partition, PoolName, RoutedBy, RunStatus, Scope, StepRoute,
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
    let start = |workflow: &str| StartRun {
        workflow: workflow.into(),
        input: Value::Null,
        namespace: Some(acme.clone()),
        ..Default::default()
    };
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
