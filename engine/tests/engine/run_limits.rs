//! What happens to a run as a whole: its timeout fails it wherever it waits, it can set its own
//! search attributes, and a run that fails starts its workflow's dead-letter workflow, once.

use std::time::Duration;

use durable::StartRun;
use durable::model::{AttributeFilter, RunQuery, RunStatus, Scope};
use durable::prelude::*;
use serde_json::{Map, Value, json};

use crate::backend::Backend;
use crate::common::{wait_for, wait_for_signal_wait};

engine_cases! {
    a_run_past_its_timeout_fails_wherever_it_waits,
    a_run_sets_its_search_attributes_and_is_found_by_them,
    a_failed_run_starts_its_dead_letter_workflow_once,
}

/// `waiter` waits for signal `go` forever; `tagger` tags itself, then waits for `go`;
/// `doomed` fails; `alert` is `doomed`'s dead-letter workflow.
fn registry() -> Registry {
    let mut r = Registry::new();
    r.workflow("waiter", 1, |ctx: WorkflowContext, _: Value| async move {
        let got: Option<Value> = ctx.wait_signal("go", None).await?;
        Ok::<_, WorkflowError>(json!(got))
    });
    r.workflow(
        "tagger",
        1,
        |ctx: WorkflowContext, input: Value| async move {
            let mut set = Map::new();
            set.insert("stage".into(), json!("tagged"));
            set.insert("customer".into(), input["customer"].clone());
            ctx.upsert_search_attributes(&set)?;
            let _: Option<Value> = ctx.wait_signal("go", None).await?;
            let mut done = Map::new();
            done.insert("stage".into(), json!("done"));
            done.insert("customer".into(), Value::Null);
            ctx.upsert_search_attributes(&done)?;
            let mut nested = Map::new();
            nested.insert("bad".into(), json!({ "x": 1 }));
            let refused = ctx.upsert_search_attributes(&nested).is_err();
            Ok::<_, WorkflowError>(json!({ "refused_nested": refused }))
        },
    );
    r.workflow("doomed", 1, |_ctx: WorkflowContext, _: Value| async move {
        Err::<Value, _>(WorkflowError::msg("the order cannot be found"))
    });
    r.workflow(
        "alert",
        1,
        |_ctx: WorkflowContext, input: Value| async move { Ok::<_, WorkflowError>(input) },
    );
    r.dead_letter("doomed", "alert");
    r
}

async fn a_run_past_its_timeout_fails_wherever_it_waits(mut backend: Backend) {
    let clock = backend.test_clock();
    let h = backend.start(registry()).await;
    let start = |timeout: Option<Duration>| StartRun {
        workflow: "waiter".into(),
        input: json!({}),
        timeout,
        ..StartRun::default()
    };
    let bounded = h
        .engine
        .start_run(start(Some(Duration::from_secs(10))))
        .await
        .unwrap();
    let unbounded = h.engine.start_run(start(None)).await.unwrap();
    assert!(bounded.deadline_at.is_some());
    wait_for_signal_wait(&h.store, &bounded.id).await;
    wait_for_signal_wait(&h.store, &unbounded.id).await;
    clock.advance(Duration::from_secs(11));
    let failed = wait_for(&h.store, &bounded.id, RunStatus::Failed).await;
    let error = failed.error.unwrap();
    assert_eq!(error.code.as_deref(), Some("run_timeout"), "{error:?}");
    assert!(error.message.contains("10s"), "{}", error.message);
    let still = h
        .store
        .get_run(&Scope::All, &unbounded.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(still.status, RunStatus::Suspended);
    let refused = h
        .engine
        .start_run(start(Some(Duration::from_millis(10))))
        .await;
    assert!(refused.is_err(), "a timeout under a second is refused");
    h.stop().await;
}

async fn a_run_sets_its_search_attributes_and_is_found_by_them(backend: Backend) {
    let h = backend.start(registry()).await;
    let run = h.start_run("tagger", json!({ "customer": "c-42" })).await;
    wait_for_signal_wait(&h.store, &run.id).await;
    let tagged = h
        .store
        .get_run(&Scope::All, &run.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(tagged.search_attributes["stage"], json!("tagged"));
    assert_eq!(tagged.search_attributes["customer"], json!("c-42"));
    let by = |filter: &str| RunQuery {
        attribute: Some(AttributeFilter::parse(filter).unwrap()),
        ..RunQuery::default()
    };
    let found = h
        .store
        .list_runs(&Scope::All, &by("customer=c-42"))
        .await
        .unwrap();
    assert_eq!(found.runs.len(), 1);

    h.engine
        .signal(&Scope::All, &run.id, "go", Value::Null)
        .await
        .unwrap();
    let done = wait_for(&h.store, &run.id, RunStatus::Completed).await;
    assert_eq!(done.output, Some(json!({ "refused_nested": true })));
    assert_eq!(done.search_attributes["stage"], json!("done"));
    assert!(
        !done.search_attributes.contains_key("customer"),
        "null removes it"
    );
    let gone = h
        .store
        .list_runs(&Scope::All, &by("customer=c-42"))
        .await
        .unwrap();
    assert!(gone.runs.is_empty());
    let found = h
        .store
        .list_runs(&Scope::All, &by("stage=done"))
        .await
        .unwrap();
    assert_eq!(found.runs.len(), 1);
    h.stop().await;
}

async fn a_failed_run_starts_its_dead_letter_workflow_once(backend: Backend) {
    let h = backend.start(registry()).await;
    let run = h.start_run("doomed", json!({ "order": 7 })).await;
    wait_for(&h.store, &run.id, RunStatus::Failed).await;
    let hook_id = RunId::parse(&format!("{}.dead-letter", run.id)).unwrap();
    let hook = wait_for(&h.store, &hook_id, RunStatus::Completed).await;
    assert_eq!(hook.workflow, "alert");
    assert_eq!(hook.namespace, run.namespace);
    let output = hook.output.unwrap();
    assert_eq!(output["run_id"], json!(run.id));
    assert_eq!(output["status"], json!("failed"));
    assert_eq!(output["input"], json!({ "order": 7 }));
    assert!(
        output["error"]["message"]
            .as_str()
            .unwrap()
            .contains("cannot be found")
    );
    assert_eq!(hook.search_attributes["dead_letter_of"], json!(run.id));
    // Retried, it fails again: the hook exists already and is not started twice.
    h.engine.retry(&Scope::All, &run.id).await.unwrap();
    wait_for(&h.store, &run.id, RunStatus::Failed).await;
    let alerts = RunQuery {
        workflow: Some("alert".into()),
        ..RunQuery::default()
    };
    assert_eq!(
        h.store
            .list_runs(&Scope::All, &alerts)
            .await
            .unwrap()
            .runs
            .len(),
        1
    );
    h.stop().await;
}
