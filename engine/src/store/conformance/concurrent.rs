//! Writes in flight at once (which a backend may batch into one transaction or statement):
//! each turn, sticky turn and start keeps its own outcome.

use std::sync::Arc;

use serde_json::json;

use super::support::{
    attempt_of, completed, lease, lease_in, new_run, ns, pending_step, suspend_on_step,
};
use crate::model::{CheckpointStatus, RunId, RunStatus, Scope};
use crate::store::{Store, StoreError, TurnCommit, TurnOutcome};

/// Many writes in flight at once (the group commit batches them): each one's outcome is its
/// own. A turn under a lease nobody holds, or a start that reuses an id, changes nothing, and
/// its neighbours in the same transaction still commit.
pub async fn concurrent_writes_keep_their_own_outcomes(store: Arc<dyn Store>) {
    let claim = lease("a");
    for i in 0..32 {
        store
            .create_run(new_run(&format!("w-{i}"), "acme"), 1, Some(&claim))
            .await
            .expect("create");
    }
    let writes = (0..32).map(|i| {
        let store = store.clone();
        async move {
            let id = RunId::parse(&format!("w-{i}")).expect("id");
            let (owner, output) = if i % 2 == 0 { ("a", 1) } else { ("b", 2) };
            let commit = TurnCommit::new(TurnOutcome::Complete(json!(output)));
            let turned = store
                .commit_turn(&lease(owner), &id, attempt_of(&store, &id).await, commit, 5)
                .await
                .expect("commit");
            let again = store
                .create_run(new_run(&format!("w-{i}"), "acme"), 5, None)
                .await;
            (i, turned.is_some(), again)
        }
    });
    for (i, turned, again) in futures::future::join_all(writes).await {
        assert_eq!(
            turned,
            i % 2 == 0,
            "only the lease holder's turn commits (run {i})"
        );
        assert!(
            matches!(again, Err(StoreError::Conflict(_))),
            "a reused id is refused (run {i}): {again:?}"
        );
        let id = RunId::parse(&format!("w-{i}")).expect("id");
        let run = store
            .get_run(&Scope::All, &id)
            .await
            .expect("read")
            .expect("exists");
        if i % 2 == 0 {
            assert_eq!(run.status, RunStatus::Completed);
            assert_eq!(run.output, Some(json!(1)));
        } else {
            assert_eq!(
                run.status,
                RunStatus::Running,
                "the stale turn changed nothing"
            );
            assert_eq!(run.output, None);
        }
    }
}

/// Many step results arriving at once (which a store may write together) each move their own
/// run exactly as one alone would: a turn that stays suspended, one that ends the run, one whose
/// timer is already due (the run stays claimed, with its history), a stale attempt, a duplicate
/// result and a run outside the lease's scope (neither of which writes anything).
pub async fn concurrent_sticky_turns_each_move_their_own_run(store: Arc<dyn Store>) {
    let mine = lease_in("acme");
    let first = || suspend_on_step(0);
    let mut runs = Vec::new();
    for i in 0..33 {
        let namespace = if i == 32 { "globex" } else { "acme" };
        let started = store
            .create_run_and_commit(
                new_run(&format!("m-{i}"), namespace),
                &lease_in(namespace),
                first(),
                1,
            )
            .await
            .expect("start")
            .expect("in scope");
        runs.push(started.run);
    }
    let writes = runs.iter().enumerate().map(|(i, run)| {
        let (store, mine) = (store.clone(), mine.clone());
        let (id, attempt) = (run.id.clone(), run.attempt);
        async move {
            let (commit, attempt) = match i % 4 {
                0 => (suspend_on_step(1), attempt),
                1 => (TurnCommit::new(TurnOutcome::Complete(json!(i))), attempt),
                2 => (
                    TurnCommit::new(TurnOutcome::Complete(json!("stale"))),
                    attempt + 1,
                ),
                _ => (
                    TurnCommit::new(TurnOutcome::Suspend { wake_at: Some(0) }),
                    attempt,
                ),
            };
            let result = completed(&id, 0, json!({"step": i}));
            let applied = store
                .apply_result_and_commit(&result, &mine, attempt, commit, 2)
                .await
                .expect("sticky");
            (i, id, applied)
        }
    });
    // The same result twice for run 0: only one of them moves it.
    let duplicate = {
        let (store, mine, run) = (store.clone(), mine.clone(), runs[0].clone());
        async move {
            let result = completed(&run.id, 0, json!({"step": 0}));
            store
                .apply_result_and_commit(&result, &mine, run.attempt, suspend_on_step(1), 2)
                .await
                .expect("sticky")
        }
    };
    let (applied, duplicate) =
        futures::future::join(futures::future::join_all(writes), duplicate).await;
    let mut run_0_moved = duplicate.is_some();
    for (i, id, applied) in applied {
        let run = store
            .get_run(&Scope::All, &id)
            .await
            .expect("read")
            .expect("exists");
        let steps = store.checkpoints(&Scope::All, &id).await.expect("read");
        let recorded = steps[0].status == CheckpointStatus::Completed;
        if i == 32 || i % 4 == 2 {
            assert!(applied.is_none(), "run {i}: stale or out of scope");
            assert_eq!(run.status, RunStatus::Suspended, "run {i} unchanged");
            assert!(!recorded, "run {i}: its result waits for a turn");
            assert_eq!(steps.len(), 1);
            continue;
        }
        if i == 0 {
            assert!(
                !(run_0_moved && applied.is_some()),
                "a duplicate result moved run 0 twice"
            );
            run_0_moved |= applied.is_some();
        } else {
            assert!(applied.is_some(), "run {i} was untouched");
        }
        assert!(recorded, "run {i}: its result is recorded");
        assert_eq!(steps[0].output, Some(json!({"step": i})));
        assert_eq!(run.updated_at, 2);
        match i % 4 {
            0 => {
                assert_eq!(run.status, RunStatus::Suspended);
                assert_eq!(steps.len(), 2, "run {i}: its next step is written");
                assert_eq!(steps[1].status, CheckpointStatus::Pending);
            }
            1 => {
                assert_eq!(run.status, RunStatus::Completed);
                assert_eq!(run.output, Some(json!(i)));
                assert_eq!(run.finished_at, Some(2));
            }
            _ => {
                assert_eq!(run.status, RunStatus::Running, "run {i}: its timer is due");
                assert_eq!(run.locked_by.as_deref(), Some("a"));
                let history = applied.and_then(|c| c.history).expect("claimed: history");
                assert_eq!(history.checkpoints, steps);
            }
        }
    }
    assert!(run_0_moved, "one of run 0's results moved it");
}

/// Starts sent at once (which a backend may write in one statement) each insert their own run as
/// its first turn left it, with that turn's checkpoints. Of two starts with one id exactly one
/// inserts; a start with a taken id, and one outside the lease's scope, write nothing.
pub async fn concurrent_starts_each_insert_their_own_run(store: Arc<dyn Store>) {
    let mine = lease_in("acme");
    let finished = TurnCommit::new(TurnOutcome::Complete(json!("first")));
    store
        .create_run_and_commit(new_run("s-taken", "acme"), &mine, finished, 1)
        .await
        .expect("start")
        .expect("in scope");
    let first_turn = |i: usize| match i % 3 {
        0 => suspend_on_step(0),
        1 => TurnCommit::new(TurnOutcome::Complete(json!(i))),
        _ => TurnCommit {
            checkpoints: vec![pending_step(0)],
            ..TurnCommit::new(TurnOutcome::Suspend { wake_at: Some(0) })
        },
    };
    let fresh = (0..32).map(|i| (format!("s-{i}"), "acme", first_turn(i)));
    let refused = [
        ("s-0".to_owned(), "acme", first_turn(0)),
        ("s-taken".to_owned(), "acme", first_turn(0)),
        ("s-out".to_owned(), "globex", first_turn(0)),
    ];
    let starts = fresh.chain(refused).map(|(id, namespace, commit)| {
        let (store, mine) = (store.clone(), mine.clone());
        async move {
            let started = store
                .create_run_and_commit(new_run(&id, namespace), &mine, commit, 2)
                .await;
            (id, started)
        }
    });
    let mut s0_started = 0;
    for (id, started) in futures::future::join_all(starts).await {
        let run_id = RunId::parse(&id).expect("id");
        let stored = store.get_run(&Scope::All, &run_id).await.expect("read");
        let steps = store.checkpoints(&Scope::All, &run_id).await.expect("read");
        match id.as_str() {
            "s-taken" => {
                assert!(
                    matches!(started, Err(StoreError::Conflict(_))),
                    "a taken id is refused: {started:?}"
                );
                let kept = stored.expect("kept");
                assert_eq!(
                    kept.output,
                    Some(json!("first")),
                    "the refused start changed nothing"
                );
                assert_eq!(kept.updated_at, 1);
                assert!(steps.is_empty(), "the refused start wrote no checkpoint");
                continue;
            }
            "s-out" => {
                assert!(
                    matches!(started, Ok(None)),
                    "a lease never starts a run outside its scope: {started:?}"
                );
                assert!(stored.is_none() && steps.is_empty());
                continue;
            }
            _ => {}
        }
        let i: usize = id.trim_start_matches("s-").parse().expect("number");
        let committed = match started {
            Err(StoreError::Conflict(_)) if i == 0 => continue,
            started => started.expect("start").expect("in scope"),
        };
        s0_started += usize::from(i == 0);
        let run = stored.expect("inserted");
        assert_eq!(
            committed.run, run,
            "run {i}: the start answers the stored run"
        );
        assert_eq!(run.namespace, ns("acme"));
        assert_eq!(run.input, json!({"n": 1}));
        assert_eq!(run.created_at, 2);
        match i % 3 {
            0 => {
                assert_eq!(run.status, RunStatus::Suspended, "run {i}");
                assert_eq!((run.locked_by, run.attempt), (None, 1));
                assert_eq!(steps.len(), 1, "run {i}: its step is written");
                assert_eq!(steps[0].status, CheckpointStatus::Pending);
                assert_eq!(steps[0].input, Some(json!({"amount": 5})));
            }
            1 => {
                assert_eq!(run.status, RunStatus::Completed, "run {i}");
                assert_eq!(run.output, Some(json!(i)));
                assert_eq!(run.finished_at, Some(2));
                assert!(steps.is_empty());
            }
            _ => {
                assert_eq!(run.status, RunStatus::Running, "run {i}: its timer is due");
                assert_eq!((run.locked_by.as_deref(), run.attempt), (Some("a"), 2));
                assert_eq!(steps.len(), 1, "run {i}: its step is written");
                let history = committed.history.expect("claimed: history");
                assert_eq!(history.checkpoints, steps);
            }
        }
    }
    assert_eq!(
        s0_started, 1,
        "exactly one of two starts with one id inserted it"
    );
}
