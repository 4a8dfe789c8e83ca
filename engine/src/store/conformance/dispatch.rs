//! Lost dispatches: when a sent step counts as lost (by age, by sender, by a lapsed
//! heartbeat), and when it never does.

use std::sync::Arc;

use super::support::{ns, suspended_on_a_step_sent_by};
use crate::model::{Millis, RunId, Scope};
use crate::store::{LostDispatch, Store};

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
