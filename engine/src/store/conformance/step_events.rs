//! A worker's reports on a step in flight: step events checkpoint a finished local step, and
//! step beats move a pending step's dispatch time.

use std::sync::Arc;

use serde_json::json;

use super::support::{
    attempt_of, completed, lease, new_run, ns, pending_step, suspended_on_a_step,
};
use crate::model::{CheckpointStatus, RunId, RunStatus, Scope};
use crate::store::{NewCheckpoint, RunPatch, Store, TurnCommit, TurnOutcome};

/// A worker's step event checkpoints a finished local step before the turn's decision: only
/// for an unfinished run in the caller's scope, only at a free position, and the decision's own
/// record of the step later keeps it as it is.
pub async fn step_events_checkpoint_only_open_runs_in_scope(store: Arc<dyn Store>) {
    let (acme, globex) = (Scope::Only(ns("acme")), Scope::Only(ns("globex")));
    let run = store
        .create_run(new_run("ev-1", "acme"), 1, Some(&lease("a")))
        .await
        .expect("create");
    let step = |output: i64| {
        NewCheckpoint::recorded_step(0, "reserve".into(), Some(json!(output)), None, 2, 3)
    };
    assert!(
        !store
            .record_local_step(&globex, &run.id, step(7))
            .await
            .expect("write"),
        "another tenant's scope cannot write"
    );
    assert!(
        store
            .checkpoints(&acme, &run.id)
            .await
            .expect("read")
            .is_empty()
    );
    assert!(
        store
            .record_local_step(&acme, &run.id, step(7))
            .await
            .expect("write")
    );
    assert!(
        !store
            .record_local_step(&acme, &run.id, step(8))
            .await
            .expect("write"),
        "a taken position is kept"
    );
    // The decision records the same step again, with the next one.
    let commit = TurnCommit {
        checkpoints: vec![step(9), pending_step(1)],
        ..TurnCommit::new(TurnOutcome::Suspend { wake_at: None })
    };
    store
        .commit_turn(
            &lease("a"),
            &run.id,
            attempt_of(&store, &run.id).await,
            commit,
            5,
        )
        .await
        .expect("commit")
        .expect("held");
    let cps = store.checkpoints(&acme, &run.id).await.expect("read");
    assert_eq!(cps.len(), 2);
    assert_eq!(cps[0].status, CheckpointStatus::Completed);
    assert_eq!(
        cps[0].output,
        Some(json!(7)),
        "the first record of a step stands"
    );
    store
        .update_run_if(
            &acme,
            &run.id,
            &[RunStatus::Suspended],
            RunPatch {
                status: RunStatus::Cancelled,
                error: None,
            },
            6,
        )
        .await
        .expect("cancel")
        .expect("was suspended");
    let late = NewCheckpoint::recorded_step(2, "late".into(), None, None, 6, 7);
    assert!(
        !store
            .record_local_step(&acme, &run.id, late)
            .await
            .expect("write"),
        "an ended run takes no more steps"
    );
    let missing = RunId::parse("ev-missing").expect("id");
    assert!(
        !store
            .record_local_step(&Scope::All, &missing, step(1))
            .await
            .expect("write")
    );
}

/// A worker's step beat moves only its own pending step's dispatch time: not from another
/// tenant's scope, not for a step sent to another routing token, not once the step resolved.
pub async fn step_beats_touch_only_their_own_pending_step(store: Arc<dyn Store>) {
    let (acme, globex) = (Scope::Only(ns("acme")), Scope::Only(ns("globex")));
    let run = suspended_on_a_step(&store, "beat-1", "acme").await;
    let sent_at = |store: Arc<dyn Store>| {
        let (acme, id) = (acme.clone(), run.id.clone());
        async move { store.checkpoints(&acme, &id).await.expect("read")[0].enqueued_at }
    };
    for (scope, seq, group) in [
        (&globex, 0, "charge@acme"),
        (&acme, 0, "charge@globex"),
        (&acme, 1, "charge@acme"),
    ] {
        assert!(
            !store
                .beat_step(scope, &run.id, seq, group, 50)
                .await
                .expect("beat"),
            "a beat from {scope:?} for seq {seq} on {group} touches nothing"
        );
    }
    assert_eq!(sent_at(store.clone()).await, Some(10));
    assert!(
        store
            .beat_step(&acme, &run.id, 0, "charge@acme", 50)
            .await
            .expect("beat")
    );
    assert_eq!(sent_at(store.clone()).await, Some(50));
    let result = completed(&run.id, 0, json!(1));
    store
        .apply_step_result(&result, 60, None)
        .await
        .expect("apply")
        .expect("recorded");
    assert!(
        !store
            .beat_step(&acme, &run.id, 0, "charge@acme", 70)
            .await
            .expect("beat"),
        "a resolved step takes no beats"
    );
    assert_eq!(sent_at(store.clone()).await, Some(50));
}
