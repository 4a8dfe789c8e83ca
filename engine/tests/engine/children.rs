//! Child runs: fan-outs in the parent's namespace, continue-as-new chains, and fail-fast
//! gathers that cancel the siblings.

use std::sync::Arc;
use std::sync::atomic::AtomicU32;
use std::time::Duration;

use durable::StartRun;
use durable::model::{CheckpointKind, Namespace, RunStatus, Scope};
use durable::prelude::*;
use serde_json::{Value, json};

use crate::backend::Backend;
use crate::common::wait_for;
use crate::registries::{order_registry, signal_registry};

engine_cases! {
    children_fan_out_in_the_parents_namespace_and_their_failures_reach_the_parent,
    continue_as_new_chains_successors_in_the_same_namespace_and_settles_a_waiting_parent,
    a_child_failing_under_fail_fast_cancels_its_siblings,
}

async fn children_fan_out_in_the_parents_namespace_and_their_failures_reach_the_parent(
    backend: Backend,
) {
    let mut r = order_registry(Arc::new(AtomicU32::new(0)));
    r.workflow("fan", 1, |ctx: WorkflowContext, n: i64| async move {
        let kids = (0..n).map(|i| {
            let ctx = ctx.clone();
            async move { ctx.child::<_, Value>("sum3", &i).await }
        });
        let outputs = futures::future::join_all(kids).await;
        let mut total = 0;
        for out in outputs {
            total += out?["total"].as_i64().unwrap_or_default();
        }
        // A failing child surfaces as an error the parent can handle.
        let failed = ctx.child::<_, Value>("sum3", &"not a number").await;
        Ok::<_, WorkflowError>(json!({ "total": total, "child_failed": failed.is_err() }))
    });
    let h = backend.start(r).await;
    let acme = Namespace::tenant("acme").unwrap();
    let run = h
        .engine
        .start_run(StartRun {
            workflow: "fan".into(),
            input: json!(3),
            namespace: Some(acme.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    let done = wait_for(&h.store, &run.id, RunStatus::Completed).await;
    // Children 0, 1, 2 return i + 3.
    assert_eq!(
        done.output,
        Some(json!({ "total": 3 + 4 + 5, "child_failed": true }))
    );
    let page = h
        .store
        .list_runs(&Scope::All, &durable::model::RunQuery::default())
        .await
        .unwrap();
    let children: Vec<_> = page
        .runs
        .iter()
        .filter(|r| r.parent_run_id.as_ref() == Some(&run.id))
        .collect();
    assert_eq!(children.len(), 4);
    for child in &children {
        assert_eq!(
            child.namespace, acme,
            "a child is stamped with its parent's namespace"
        );
        assert_eq!(child.root_run_id, run.id);
        assert_eq!(child.nesting_depth, 1);
        assert!(child.id.as_str().starts_with(&format!("{}.child.", run.id)));
    }
    assert_eq!(
        children
            .iter()
            .filter(|c| c.status == RunStatus::Failed)
            .count(),
        1
    );
    let cps = h.store.checkpoints(&Scope::All, &run.id).await.unwrap();
    assert!(cps.iter().all(|c| c.kind == CheckpointKind::Child));
    h.stop().await;
}

async fn continue_as_new_chains_successors_in_the_same_namespace_and_settles_a_waiting_parent(
    backend: Backend,
) {
    let mut r = Registry::new();
    r.workflow("countdown", 1, |ctx: WorkflowContext, n: u32| async move {
        let seen: u32 = ctx.local_step("tick", || async move { Ok(n) }).await?;
        if seen > 0 {
            return Err(ctx.continue_as_new(&(seen - 1)));
        }
        Ok(json!("liftoff"))
    });
    r.workflow("launcher", 1, |ctx: WorkflowContext, _: Value| async move {
        let out: Value = ctx.child("countdown", &2).await?;
        Ok::<_, WorkflowError>(json!({ "child": out }))
    });
    let h = backend.start(r).await;
    let acme = Namespace::tenant("acme").unwrap();
    let first = h
        .engine
        .start_run(StartRun {
            workflow: "countdown".into(),
            input: json!(2),
            namespace: Some(acme.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    let last_id = durable::model::RunId::parse(&format!("{}:c2", first.id)).unwrap();
    for _ in 0..500 {
        if h.store
            .get_run(&Scope::All, &last_id)
            .await
            .unwrap()
            .is_some()
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let last = wait_for(&h.store, &last_id, RunStatus::Completed).await;
    assert_eq!(last.output, Some(json!("liftoff")));
    assert_eq!(last.namespace, acme);
    assert_eq!(last.root_run_id, first.id, "lineage is kept");
    let middle = h
        .store
        .get_run(&Scope::All, &last.continued_from.clone().unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(middle.status, RunStatus::Continued);
    assert_eq!(middle.continued_from.as_ref(), Some(&first.id));
    assert_eq!(
        h.store
            .checkpoints(&Scope::All, &last.id)
            .await
            .unwrap()
            .len(),
        1,
        "each successor starts with a clean history"
    );

    let parent = h.start_run("launcher", json!({})).await;
    let done = wait_for(&h.store, &parent.id, RunStatus::Completed).await;
    assert_eq!(
        done.output,
        Some(json!({ "child": "liftoff" })),
        "the end of the child's chain settles the parent"
    );
    h.stop().await;
}

async fn a_child_failing_under_fail_fast_cancels_its_siblings(backend: Backend) {
    use durable::runtime::Gather;
    let mut r = signal_registry();
    r.workflow("kid", 1, |ctx: WorkflowContext, kind: String| async move {
        match kind.as_str() {
            "boom" => Err(WorkflowError::msg("boom")),
            "slow" => {
                ctx.sleep(Duration::from_secs(3600)).await;
                Ok(json!("slept"))
            }
            _ => Ok(ctx
                .wait_signal::<Value>("never", None)
                .await?
                .unwrap_or_default()),
        }
    });
    r.workflow(
        "brood",
        1,
        |ctx: WorkflowContext, mode: String| async move {
            let kids = [("kid", "slow"), ("kid", "boom"), ("kid", "waits")];
            let mode = if mode == "fail_fast" {
                Gather::FailFast
            } else {
                Gather::WaitAll
            };
            let out: Vec<Value> = ctx.gather_children(&kids, mode).await?;
            Ok::<_, WorkflowError>(json!(out))
        },
    );
    let h = backend.start(r).await;
    let acme = Namespace::tenant("acme").unwrap();
    let run = h
        .engine
        .start_run(StartRun {
            workflow: "brood".into(),
            input: json!("fail_fast"),
            namespace: Some(acme),
            ..Default::default()
        })
        .await
        .unwrap();
    let failed = wait_for(&h.store, &run.id, RunStatus::Failed).await;
    assert_eq!(failed.error.unwrap().message, "boom");
    let kid = |seq: u32| durable::runtime::child_run_id(&run.id, seq);
    for seq in [0, 2] {
        let sibling = wait_for(&h.store, &kid(seq), RunStatus::Cancelled).await;
        assert_eq!(
            sibling.error.unwrap().code.as_deref(),
            Some("cancelled"),
            "sibling {seq}"
        );
    }
    assert_eq!(
        h.store
            .get_run(&Scope::All, &kid(1))
            .await
            .unwrap()
            .unwrap()
            .status,
        RunStatus::Failed
    );
    h.stop().await;
}
