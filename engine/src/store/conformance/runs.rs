//! Creating runs: a run reads back as created, ids are unique, and a start may claim its run
//! or commit its first turn in the same write.

use std::sync::Arc;

use serde_json::json;

use super::support::{completed, lease, lease_in, new_run, ns, pending_step, suspend_on_step};
use crate::model::{CheckpointStatus, RunId, RunStatus, Scope};
use crate::store::{Claim, History, NewRun, Store, StoreError, TurnCommit, TurnOutcome};

/// A created run reads back field for field, and its id cannot be reused.
pub async fn created_runs_read_back_and_ids_are_unique(store: Arc<dyn Store>) {
    let run = store
        .create_run(new_run("r1", "acme"), 100, None)
        .await
        .expect("create");
    assert_eq!(run.status, RunStatus::Pending);
    assert_eq!(run.namespace, ns("acme"));
    assert_eq!(run.root_run_id, run.id);
    assert_eq!(run.created_at, 100);
    let again = store
        .get_run(&Scope::All, &run.id)
        .await
        .expect("get")
        .expect("exists");
    assert_eq!(again, run, "a run must read back exactly as created");
    let dup = store.create_run(new_run("r1", "globex"), 101, None).await;
    assert!(
        matches!(dup, Err(StoreError::Conflict(_))),
        "reusing a run id must be a conflict, got {dup:?}"
    );
}

/// A start may claim its run at once, but only inside the claimer's scope.
pub async fn starts_claim_their_run_inside_the_scope(store: Arc<dyn Store>) {
    let mine = Claim {
        scope: Scope::Only(ns("acme")),
        ..lease("a")
    };
    let run = store
        .create_run(new_run("e1", "acme"), 5, Some(&mine))
        .await
        .expect("create");
    assert_eq!(run.status, RunStatus::Running);
    assert_eq!(run.locked_by.as_deref(), Some("a"));
    assert_eq!(run.locked_until, Some(10_000));
    assert!(
        store
            .claim_runs(&Scope::All, "b", 6, 100, 10, 5)
            .await
            .expect("claim")
            .is_empty(),
        "a run claimed at start is not claimed again"
    );
    let other = store
        .create_run(new_run("e2", "globex"), 5, Some(&mine))
        .await
        .expect("create");
    assert_eq!(
        other.status,
        RunStatus::Pending,
        "a claim never reaches outside its scope"
    );
    assert_eq!(other.locked_by, None);
}

/// A start with its first turn is one write: the run comes back as the turn left it, with the
/// turn's checkpoints; a reused id or a namespace outside the lease's scope writes nothing.
pub async fn a_start_commits_its_first_turn_with_the_insert(store: Arc<dyn Store>) {
    let mine = lease_in("acme");
    let first = || suspend_on_step(0);
    let committed = store
        .create_run_and_commit(new_run("f1", "acme"), &mine, first(), 5)
        .await
        .expect("start")
        .expect("in scope");
    assert_eq!(committed.run.status, RunStatus::Suspended);
    assert_eq!(
        committed.run.locked_by, None,
        "a suspended run holds no lease"
    );
    assert_eq!(committed.run.created_at, 5);
    let id = committed.run.id.clone();
    let stored = store.checkpoints(&Scope::All, &id).await.expect("read");
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].status, CheckpointStatus::Pending);
    let derived = History::default().appended(&id, &[pending_step(0)]);
    assert_eq!(
        committed.history.unwrap_or(derived).checkpoints,
        stored,
        "the history a sticky driver caches is the stored one"
    );
    // The step's result takes the sticky path like any suspended run's.
    let result = completed(&id, 0, json!({"ok": true}));
    let done = store
        .apply_result_and_commit(
            &result,
            &mine,
            committed.run.attempt,
            TurnCommit::new(TurnOutcome::Complete(json!("done"))),
            6,
        )
        .await
        .expect("sticky")
        .expect("untouched");
    assert_eq!(done.run.status, RunStatus::Completed);

    let again = store
        .create_run_and_commit(new_run("f1", "acme"), &mine, first(), 7)
        .await;
    assert!(
        matches!(again, Err(StoreError::Conflict(_))),
        "a reused id is refused: {again:?}"
    );
    let kept = store
        .get_run(&Scope::All, &id)
        .await
        .expect("read")
        .expect("kept");
    assert_eq!(
        kept.status,
        RunStatus::Completed,
        "the refused start changed nothing"
    );
    assert_eq!(kept.updated_at, 6);

    // A first turn that starts a child, and one that ends the run at once.
    let child = NewRun {
        parent_run_id: Some(RunId::parse("f3").expect("id")),
        root_run_id: RunId::parse("f3").expect("id"),
        nesting_depth: 1,
        ..new_run("f3.child.0", "acme")
    };
    let with_child = TurnCommit {
        children: vec![child],
        ..TurnCommit::new(TurnOutcome::Suspend { wake_at: None })
    };
    let parent = store
        .create_run_and_commit(new_run("f3", "acme"), &mine, with_child, 9)
        .await
        .expect("start")
        .expect("in scope");
    assert_eq!(parent.run.status, RunStatus::Suspended);
    let started = store
        .get_run(&Scope::All, &RunId::parse("f3.child.0").expect("id"))
        .await
        .expect("read")
        .expect("the child was started with its parent");
    assert_eq!(started.status, RunStatus::Pending);
    let done_at_once = store
        .create_run_and_commit(
            new_run("f4", "acme"),
            &mine,
            TurnCommit::new(TurnOutcome::Complete(json!(4))),
            10,
        )
        .await
        .expect("start")
        .expect("in scope");
    assert_eq!(done_at_once.run.status, RunStatus::Completed);
    assert_eq!(done_at_once.run.output, Some(json!(4)));
    assert_eq!(done_at_once.run.finished_at, Some(10));

    let outside = store
        .create_run_and_commit(new_run("f2", "globex"), &mine, first(), 8)
        .await
        .expect("start");
    assert!(
        outside.is_none(),
        "a lease never starts a run outside its scope"
    );
    let f2 = RunId::parse("f2").expect("id");
    assert!(
        store
            .get_run(&Scope::All, &f2)
            .await
            .expect("read")
            .is_none()
    );
    assert!(
        store
            .checkpoints(&Scope::All, &f2)
            .await
            .expect("read")
            .is_empty()
    );
}
