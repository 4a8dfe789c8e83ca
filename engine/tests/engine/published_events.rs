//! Published events: an event reaches the waits of its own tenant's runs whose filters it
//! passes, once per event id; a trigger starts one run per event id; signal-with-start starts a
//! run once and signals it.

use durable::model::{EventFilter, EventId, Namespace, PublishedEvent, RunQuery, RunStatus, Scope};
use durable::prelude::*;
use durable::{EngineError, StartRun};
use serde_json::{Value, json};

use crate::backend::Backend;
use crate::common::{wait_for, wait_for_signal_wait};

engine_cases! {
    an_event_reaches_the_waits_it_passes_in_its_own_tenant_only,
    a_trigger_starts_one_run_per_event_id,
    signal_with_start_starts_the_run_once_and_signals_it,
}

/// `parcel` waits for `parcel.delivered` about its order; `fulfil` is started by
/// `order.placed`; `inbox` takes two `msg` signals.
fn registry() -> Registry {
    let mut r = Registry::new();
    r.workflow(
        "parcel",
        1,
        |ctx: WorkflowContext, input: Value| async move {
            let order = input["order"].as_str().unwrap_or_default().to_owned();
            let delivered: Option<Value> = ctx
                .wait_event("parcel.delivered", EventFilter::key(order), None)
                .await?;
            Ok::<_, WorkflowError>(json!({ "delivered": delivered }))
        },
    );
    r.workflow(
        "fulfil",
        1,
        |_ctx: WorkflowContext, input: Value| async move { Ok::<_, WorkflowError>(input) },
    );
    r.trigger("order.placed", "fulfil");
    r.workflow(
        "inbox",
        1,
        |ctx: WorkflowContext, _input: Value| async move {
            let first: Option<Value> = ctx.wait_signal("msg", None).await?;
            let second: Option<Value> = ctx.wait_signal("msg", None).await?;
            Ok::<_, WorkflowError>(json!([first, second]))
        },
    );
    r
}

fn tenant(name: &str) -> Namespace {
    Namespace::tenant(name).unwrap()
}

fn event(name: &str, key: Option<&str>, payload: Value, id: Option<&str>) -> PublishedEvent {
    PublishedEvent {
        name: name.into(),
        payload,
        key: key.map(str::to_owned),
        id: id.map(|i| EventId::parse(i).unwrap()),
    }
}

async fn parcel(engine: &Engine, tenant_name: &str, order: &str) -> RunId {
    engine
        .start_run(StartRun {
            workflow: "parcel".into(),
            input: json!({ "order": order }),
            namespace: Some(tenant(tenant_name)),
            ..StartRun::default()
        })
        .await
        .unwrap()
        .id
}

async fn an_event_reaches_the_waits_it_passes_in_its_own_tenant_only(backend: Backend) {
    let h = backend.start(registry()).await;
    let acme_1 = parcel(&h.engine, "acme", "o-1").await;
    let acme_2 = parcel(&h.engine, "acme", "o-2").await;
    let globex_1 = parcel(&h.engine, "globex", "o-1").await;
    for id in [&acme_1, &acme_2, &globex_1] {
        wait_for_signal_wait(&h.store, id).await;
    }
    let acme = Scope::Only(tenant("acme"));

    // Key o-1 in acme: acme's o-1 only, not globex's run with the same key.
    let outcome = h
        .engine
        .publish(
            &acme,
            event(
                "parcel.delivered",
                Some("o-1"),
                json!({ "at": "door" }),
                None,
            ),
        )
        .await
        .unwrap();
    assert_eq!(outcome.delivered, 1);
    let done = wait_for(&h.store, &acme_1, RunStatus::Completed).await;
    assert_eq!(done.output, Some(json!({ "delivered": { "at": "door" } })));
    for id in [&acme_2, &globex_1] {
        let run = h.store.get_run(&Scope::All, id).await.unwrap().unwrap();
        assert_eq!(run.status, RunStatus::Suspended, "{id} was reached");
    }

    // With an id: published twice, it reaches acme's o-2 once.
    let paid = || {
        event(
            "parcel.delivered",
            Some("o-2"),
            json!({ "n": 1 }),
            Some("e-2"),
        )
    };
    let first = h.engine.publish(&acme, paid()).await.unwrap();
    assert_eq!(first.delivered, 1);
    let again = h.engine.publish(&acme, paid()).await.unwrap();
    assert_eq!(again.delivered, 1, "the repeat says what the first did");
    let done = wait_for(&h.store, &acme_2, RunStatus::Completed).await;
    assert_eq!(done.output, Some(json!({ "delivered": { "n": 1 } })));
    // Nobody waits any more in acme; globex's run waits still, and globex can reach it.
    let none = h
        .engine
        .publish(
            &acme,
            event("parcel.delivered", Some("o-1"), json!(2), None),
        )
        .await
        .unwrap();
    assert_eq!(none.delivered, 0);
    let theirs = h
        .engine
        .publish(
            &Scope::Only(tenant("globex")),
            event("parcel.delivered", Some("o-1"), json!(3), Some("e-2")),
        )
        .await
        .unwrap();
    assert_eq!(theirs.delivered, 1, "an event id is the tenant's own");
    wait_for(&h.store, &globex_1, RunStatus::Completed).await;

    // An operator's scope is no one tenant; a blank name is refused.
    let all = h
        .engine
        .publish(&Scope::All, event("parcel.delivered", None, json!(0), None))
        .await;
    assert!(matches!(all, Err(EngineError::BadInput(_))), "{all:?}");
    let blank = h
        .engine
        .publish(&acme, event(" ", None, json!(0), None))
        .await;
    assert!(matches!(blank, Err(EngineError::BadInput(_))), "{blank:?}");
    h.stop().await;
}

async fn a_trigger_starts_one_run_per_event_id(backend: Backend) {
    let h = backend.start(registry()).await;
    let placed = |id: Option<&str>| event("order.placed", None, json!({ "order": "o-9" }), id);
    let acme = Scope::Only(tenant("acme"));
    let first = h.engine.publish(&acme, placed(Some("p-1"))).await.unwrap();
    let again = h.engine.publish(&acme, placed(Some("p-1"))).await.unwrap();
    assert_eq!(first.started.len(), 1);
    assert_eq!(
        first.started, again.started,
        "published again: the same run"
    );
    let run = wait_for(&h.store, &first.started[0], RunStatus::Completed).await;
    assert_eq!(run.namespace, tenant("acme"));
    assert_eq!(run.output, Some(json!({ "order": "o-9" })));
    assert_eq!(run.search_attributes["event"], json!("order.placed"));
    assert_eq!(run.search_attributes["event_id"], json!("p-1"));

    // Another tenant's event under the same id starts its own run; without an id, each
    // publication starts one.
    let theirs = h
        .engine
        .publish(&Scope::Only(tenant("globex")), placed(Some("p-1")))
        .await
        .unwrap();
    assert_ne!(theirs.started, first.started);
    h.engine.publish(&acme, placed(None)).await.unwrap();
    let fulfil = RunQuery {
        workflow: Some("fulfil".into()),
        ..RunQuery::default()
    };
    let acme_runs = h.store.list_runs(&acme, &fulfil).await.unwrap();
    assert_eq!(acme_runs.runs.len(), 2);
    h.stop().await;
}

async fn signal_with_start_starts_the_run_once_and_signals_it(backend: Backend) {
    let h = backend.start(registry()).await;
    let acme = Scope::Only(tenant("acme"));
    let id = RunId::parse("inbox-ann").unwrap();
    let start = || StartRun {
        workflow: "inbox".into(),
        input: json!({}),
        namespace: Some(tenant("acme")),
        id: Some(id.clone()),
        ..StartRun::default()
    };
    let (_, started) = h
        .engine
        .signal_with_start(&acme, start(), "msg", json!(1))
        .await
        .unwrap();
    assert!(started);
    let (_, started) = h
        .engine
        .signal_with_start(&acme, start(), "msg", json!(2))
        .await
        .unwrap();
    assert!(!started, "the run exists: only signalled");
    let run = wait_for(&h.store, &id, RunStatus::Completed).await;
    assert_eq!(run.output, Some(json!([1, 2])));
    let ended = h
        .engine
        .signal_with_start(&acme, start(), "msg", json!(3))
        .await;
    assert!(matches!(ended, Err(EngineError::RunEnded(_))), "{ended:?}");
    // Another tenant cannot signal it through its id.
    let mut theirs = start();
    theirs.namespace = Some(tenant("globex"));
    let crossed = h
        .engine
        .signal_with_start(&Scope::Only(tenant("globex")), theirs, "msg", json!(4))
        .await;
    assert!(
        matches!(crossed, Err(EngineError::RunExists(_))),
        "{crossed:?}"
    );
    // A signal that would be refused starts nothing.
    let bob = RunId::parse("inbox-bob").unwrap();
    let mut refused = start();
    refused.id = Some(bob.clone());
    let refused = h
        .engine
        .signal_with_start(&acme, refused, "msg", json!("a\u{0}b"))
        .await;
    assert!(
        matches!(refused, Err(EngineError::BadInput(_))),
        "{refused:?}"
    );
    assert!(h.store.get_run(&Scope::All, &bob).await.unwrap().is_none());
    h.stop().await;
}
