//! Committing a turn: fenced by the claim's attempt, a due timer keeps the run claimed, and the
//! history a caller derives is the stored one.

use std::sync::Arc;

use serde_json::json;

use super::support::{attempt_of, lease, new_run, pending_step};
use crate::model::{RunStatus, Scope};
use crate::store::{History, NewCheckpoint, Store, TurnCommit, TurnOutcome};

/// A turn computed under a claim whose lease lapsed cannot commit, even when the same owner has
/// claimed the run again since: the commit names the attempt its claim gave it.
pub async fn a_turn_that_outlived_its_claim_cannot_commit(store: Arc<dyn Store>) {
    store
        .create_run(new_run("o1", "acme"), 1, None)
        .await
        .expect("create");
    let first = store
        .claim_runs(&Scope::All, "a", 10, 100, 10, 5)
        .await
        .expect("claim");
    let again = store
        .claim_runs(&Scope::All, "a", 111, 100, 10, 5)
        .await
        .expect("claim");
    assert_eq!((first.len(), again.len()), (1, 1));
    assert!(again[0].attempt > first[0].attempt);
    let id = &first[0].id;
    let commit = TurnCommit::new(TurnOutcome::Complete(json!("stale")));
    let stale = store
        .commit_turn(&lease("a"), id, first[0].attempt, commit, 120)
        .await
        .expect("commit");
    assert!(stale.is_none(), "the outlived turn must be refused");
    let commit = TurnCommit::new(TurnOutcome::Complete(json!("current")));
    let done = store
        .commit_turn(&lease("a"), id, again[0].attempt, commit, 121)
        .await
        .expect("commit")
        .expect("the current claim commits")
        .run;
    assert_eq!(done.output, Some(json!("current")));
}

/// A turn that suspends on a timer already due stays claimed instead of sleeping.
pub async fn a_due_timer_keeps_the_run_claimed(store: Arc<dyn Store>) {
    let run = store
        .create_run(new_run("t1", "acme"), 1, Some(&lease("a")))
        .await
        .expect("create");
    let later = store
        .commit_turn(
            &lease("a"),
            &run.id,
            attempt_of(&store, &run.id).await,
            TurnCommit::new(TurnOutcome::Suspend { wake_at: Some(50) }),
            2,
        )
        .await
        .expect("commit")
        .expect("held")
        .run;
    assert_eq!(later.status, RunStatus::Suspended);
    assert_eq!(later.locked_by, None);
    let claimed = store
        .claim_runs(&Scope::All, "a", 50, 100, 10, 5)
        .await
        .expect("claim");
    assert_eq!(claimed.len(), 1);
    let due = store
        .commit_turn(
            &lease("a"),
            &run.id,
            attempt_of(&store, &run.id).await,
            TurnCommit::new(TurnOutcome::Suspend { wake_at: Some(51) }),
            60,
        )
        .await
        .expect("commit")
        .expect("held")
        .run;
    assert_eq!(due.status, RunStatus::Running);
    assert_eq!(due.locked_until, Some(10_000));
}

/// After a commit that only appends, the history a caller derives ([`History::appended`]) is
/// exactly what the store holds, so the store need not read it back; after any other commit the
/// store still returns it.
pub async fn a_derived_history_is_the_stored_one(store: Arc<dyn Store>) {
    let run = store
        .create_run(new_run("dh", "acme"), 1, Some(&lease("a")))
        .await
        .expect("create");
    let local = NewCheckpoint::recorded_step(
        0,
        "prepare".into(),
        Some(json!({"b": 1, "a": [1.5, "x"]})),
        None,
        3,
        4,
    );
    // A step's priority is kept with it, for a dispatch sent again.
    let step = NewCheckpoint {
        priority: Some(7),
        ..pending_step(1)
    };
    let checkpoints = vec![local, step];
    let commit = TurnCommit {
        checkpoints: checkpoints.clone(),
        ..TurnCommit::new(TurnOutcome::Suspend { wake_at: None })
    };
    assert!(commit.only_appends());
    let committed = store
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
    assert_eq!(committed.run.status, RunStatus::Suspended);
    assert!(committed.history.is_none());
    let derived = History::default().appended(&run.id, &checkpoints);
    let stored = store.checkpoints(&Scope::All, &run.id).await.expect("read");
    assert_eq!(derived.checkpoints, stored);
    // A position already taken keeps what is stored.
    let mut again = pending_step(1);
    again.name = "other".into();
    assert_eq!(
        History {
            checkpoints: stored.clone(),
            signals: Vec::new()
        }
        .appended(&run.id, &[again])
        .checkpoints,
        stored
    );

    // A commit that changes a written checkpoint gets the history read back.
    let other = store
        .create_run(new_run("dh2", "acme"), 1, Some(&lease("a")))
        .await
        .expect("create");
    let commit = TurnCommit {
        checkpoints: vec![pending_step(0)],
        redispatched: vec![crate::store::Redispatch {
            seq: 0,
            worker_group: "pending_step".into(),
            route: None,
        }],
        ..TurnCommit::new(TurnOutcome::Suspend { wake_at: None })
    };
    assert!(!commit.only_appends());
    let committed = store
        .commit_turn(
            &lease("a"),
            &other.id,
            attempt_of(&store, &other.id).await,
            commit,
            5,
        )
        .await
        .expect("commit")
        .expect("held");
    let history = committed.history.expect("read back");
    assert_eq!(history.checkpoints.len(), 1);
}
