//! Lost dispatches: when a sent step counts as lost (by age, by sender, by a lapsed
//! heartbeat), and when it never does; and which steps out hold concurrency slots.

use std::sync::Arc;

use serde_json::json;

use super::support::{
    attempt_of, completed, lease, new_run, ns, pending_step, suspended_on_a_step_sent_by,
};
use crate::model::{Millis, PoolName, RoutedBy, RunId, RunStatus, Scope, StepRoute};
use crate::store::{
    LostDispatch, NewCheckpoint, RunPatch, SlotOut, Store, TurnCommit, TurnOutcome,
};

/// A step counts as lost by age, by age among one sender's own, or because its sender's
/// heartbeat lapsed; a live peer's recent step never does, and sending a step again makes it the
/// new sender's.
pub async fn lost_dispatches_spare_live_senders(store: Arc<dyn Store>) {
    let acme = Scope::Only(ns("acme"));
    let beat = |owner: &'static str, alive_until: Millis, now: Millis| {
        let store = store.clone();
        async move {
            store
                .beat_driver(owner, alive_until, now)
                .await
                .expect("beat")
        }
    };
    // Each beat counts the other drivers alive at its `now`: only live ones, never the beater.
    assert_eq!(beat("me", 1_000, 0).await, 0);
    assert_eq!(beat("peer", 1_000, 0).await, 1);
    assert_eq!(beat("crashed", 50, 0).await, 2);
    assert_eq!(beat("me", 1_000, 100).await, 1);
    assert_eq!(beat("me", 1_000, 40).await, 2);
    assert_eq!(beat("stranger", 100, 100).await, 2);
    assert_eq!(beat("me", 1_000, 1_001).await, 0);
    for (id, owner) in [
        ("ld-me", "me"),
        ("ld-peer", "peer"),
        ("ld-crashed", "crashed"),
    ] {
        suspended_on_a_step_sent_by(&store, id, "acme", owner).await;
    }
    let lost = |sent_before: Millis, by: Option<&str>, gone_at: Option<Millis>| LostDispatch {
        sent_before,
        only_sent_by: by.map(str::to_owned),
        senders_gone_at: gone_at,
    };
    let ids = |lost: LostDispatch| {
        let store = store.clone();
        let acme = acme.clone();
        async move {
            let mut ids: Vec<String> = store
                .pending_remote_steps(&acme, &lost, 10)
                .await
                .expect("pending")
                .into_iter()
                .map(|s| s.checkpoint.run_id.as_str().to_owned())
                .collect();
            ids.sort();
            ids
        }
    };
    // By age, from anyone (a transport that keeps its tasks).
    assert_eq!(
        ids(LostDispatch::sent_before(10)).await,
        ["ld-crashed", "ld-me", "ld-peer"]
    );
    assert!(ids(LostDispatch::sent_before(9)).await.is_empty());
    // By age among this driver's own, plus every step of a driver whose heartbeat lapsed.
    assert_eq!(ids(lost(9, Some("me"), Some(100))).await, ["ld-crashed"]);
    assert_eq!(
        ids(lost(10, Some("me"), Some(100))).await,
        ["ld-crashed", "ld-me"]
    );
    // Sent again by a live driver, the crashed one's step is no longer lost.
    store
        .mark_dispatched(&RunId::parse("ld-crashed").expect("id"), 0, "me", 20)
        .await
        .expect("mark");
    assert!(ids(lost(9, Some("me"), Some(100))).await.is_empty());
    // A peer that stops cleanly beats `alive_until = now`: its steps are lost at once.
    beat("peer", 100, 100).await;
    assert_eq!(ids(lost(9, Some("me"), Some(100))).await, ["ld-peer"]);
    assert!(
        store
            .pending_remote_steps(&Scope::Only(ns("globex")), &lost(10, None, Some(100)), 10)
            .await
            .expect("pending")
            .is_empty()
    );
}

/// The steps out that hold concurrency slots are those dispatched, with no result yet, of runs
/// that have not ended, in the caller's scope; the slot and the tenant come back as written.
pub async fn slots_out_are_the_slotted_steps_still_out(store: Arc<dyn Store>) {
    for (id, tenant) in [("so-a", "acme"), ("so-b", "acme"), ("so-g", "globex")] {
        let run = store
            .create_run(new_run(id, tenant), 1, Some(&lease("me")))
            .await
            .expect("create");
        // Step 0 holds a slot; step 1 holds none; step 2 holds one but waits out a retry.
        let waiting_retry = NewCheckpoint {
            enqueued_at: None,
            wake_at: Some(500),
            slot: Some("steps:charge:c2".into()),
            ..pending_step(2)
        };
        let commit = TurnCommit {
            checkpoints: vec![
                NewCheckpoint {
                    slot: Some("steps:charge:c1".into()),
                    ..pending_step(0)
                },
                pending_step(1),
                waiting_retry,
            ],
            ..TurnCommit::new(TurnOutcome::Suspend { wake_at: None })
        };
        let attempt = attempt_of(&store, &run.id).await;
        store
            .commit_turn(&lease("me"), &run.id, attempt, commit, 20)
            .await
            .expect("commit")
            .expect("held");
    }
    let out = |scope: Scope| {
        let store = store.clone();
        async move {
            let mut out = store.slots_out(&scope, 100).await.expect("slots out");
            out.sort_by(|a, b| a.run_id.as_str().cmp(b.run_id.as_str()));
            out
        }
    };
    let acme = out(Scope::Only(ns("acme"))).await;
    assert_eq!(
        acme,
        ["so-a", "so-b"]
            .map(|id| SlotOut {
                namespace: ns("acme"),
                run_id: RunId::parse(id).expect("id"),
                seq: 0,
                slot: "steps:charge:c1".into(),
            })
            .to_vec()
    );
    assert_eq!(out(Scope::All).await.len(), 3);
    // A result ends the hold; so does the end of the run.
    store
        .apply_step_result(
            &completed(&RunId::parse("so-a").expect("id"), 0, json!(1)),
            30,
            None,
        )
        .await
        .expect("apply")
        .expect("applied");
    let cancelled = store
        .update_run_if(
            &Scope::All,
            &RunId::parse("so-g").expect("id"),
            &[RunStatus::Suspended],
            RunPatch {
                status: RunStatus::Cancelled,
                error: None,
            },
            40,
        )
        .await
        .expect("cancel");
    assert!(cancelled.is_some());
    let left: Vec<String> = out(Scope::All)
        .await
        .into_iter()
        .map(|s| s.run_id.as_str().to_owned())
        .collect();
    assert_eq!(left, ["so-b"]);
}

/// Where a remote step was routed, and what decided it, is kept with its checkpoint, through a
/// run's first turn written with its insert and through a later turn.
pub async fn a_steps_route_is_kept_with_its_checkpoint(store: Arc<dyn Store>) {
    let acme = Scope::Only(ns("acme"));
    let by_rule = StepRoute {
        pool: Some(PoolName::parse("gpu").expect("pool")),
        by: RoutedBy::Rule {
            rule: 2,
            version: 9,
        },
        instead_of: Some(PoolName::parse("gpu-a").expect("pool")),
    };
    let routed = |seq: u32, route: StepRoute| NewCheckpoint {
        worker_group: Some("charge@acme.gpu".into()),
        route: Some(route),
        ..pending_step(seq)
    };
    let suspend = |checkpoints| TurnCommit {
        checkpoints,
        ..TurnCommit::new(TurnOutcome::Suspend { wake_at: None })
    };
    let first = store
        .create_run_and_commit(
            new_run("route-1", "acme"),
            &lease("me"),
            suspend(vec![routed(0, by_rule.clone())]),
            1,
        )
        .await
        .expect("create")
        .expect("held")
        .run;
    let later = store
        .create_run(new_run("route-2", "acme"), 1, Some(&lease("me")))
        .await
        .expect("create");
    store
        .commit_turn(
            &lease("me"),
            &later.id,
            attempt_of(&store, &later.id).await,
            suspend(vec![routed(0, StepRoute::by_default()), pending_step(1)]),
            2,
        )
        .await
        .expect("commit")
        .expect("held");
    let routes = |id: RunId| {
        let (store, acme) = (store.clone(), acme.clone());
        async move {
            let checkpoints = store.checkpoints(&acme, &id).await.expect("read");
            assert_eq!(
                checkpoints[0].worker_group.as_deref(),
                Some("charge@acme.gpu")
            );
            checkpoints.into_iter().map(|c| c.route).collect::<Vec<_>>()
        }
    };
    assert_eq!(routes(first.id).await, vec![Some(by_rule)]);
    assert_eq!(
        routes(later.id).await,
        vec![Some(StepRoute::by_default()), None]
    );
}
