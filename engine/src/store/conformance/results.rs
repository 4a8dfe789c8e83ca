//! Step results: applied once, waking (and claiming) the run, and the sticky "result + turn"
//! fast path for a run exactly as its driver left it.

use std::sync::Arc;

use serde_json::json;

use super::support::{
    attempt_of, completed, lease, new_run, ns, pending_step, suspended_on_a_step,
};
use crate::model::{CheckpointStatus, RunId, RunStatus, Scope, StepOutcome, StepResult};
use crate::store::{Claim, LostDispatch, Store, TurnCommit, TurnOutcome};

/// A step result is applied exactly once, wakes the run, and is dropped once the run ended.
pub async fn step_results_apply_once(store: Arc<dyn Store>) {
    store
        .create_run(new_run("s1", "acme"), 1, None)
        .await
        .expect("create");
    let id = RunId::parse("s1").expect("id");
    store
        .claim_runs(&Scope::All, "a", 10, 1000, 10, 5)
        .await
        .expect("claim");
    let commit = TurnCommit {
        checkpoints: vec![pending_step(0)],
        ..TurnCommit::new(TurnOutcome::Suspend { wake_at: None })
    };
    let run = store
        .commit_turn(&lease("a"), &id, attempt_of(&store, &id).await, commit, 20)
        .await
        .expect("commit")
        .expect("held")
        .run;
    assert_eq!(run.status, RunStatus::Suspended);
    assert_eq!(run.wake_at, None);
    let pending = store
        .pending_remote_steps(&Scope::Only(ns("acme")), &LostDispatch::sent_before(10), 10)
        .await
        .expect("pending");
    assert_eq!(pending.len(), 1);
    assert!(
        store
            .pending_remote_steps(
                &Scope::Only(ns("globex")),
                &LostDispatch::sent_before(10),
                10
            )
            .await
            .expect("pending")
            .is_empty()
    );
    let result = StepResult {
        run_id: id.clone(),
        seq: 0,
        step_id: "s1:0".into(),
        started_at: Some(25),
        outcome: StepOutcome::Completed {
            output: json!({"ok": true}),
        },
        receipt: Default::default(),
    };
    let applied = store
        .apply_step_result(&result, 30, None)
        .await
        .expect("apply")
        .expect("first result applies");
    assert_eq!(applied.checkpoint.status, CheckpointStatus::Completed);
    assert_eq!(applied.checkpoint.output, Some(json!({"ok": true})));
    assert_eq!(applied.run.wake_at, Some(30), "the run is woken");
    assert!(
        store
            .apply_step_result(&result, 31, None)
            .await
            .expect("apply")
            .is_none(),
        "a duplicate is ignored"
    );
    let claimed = store
        .claim_runs(&Scope::All, "a", 31, 1000, 10, 5)
        .await
        .expect("claim");
    assert_eq!(claimed.len(), 1, "the woken run is claimable");
}

/// A result that lands while a turn runs is not lost: the turn's suspend wakes at once.
pub async fn results_during_a_turn_wake_the_run(store: Arc<dyn Store>) {
    store
        .create_run(new_run("w1", "acme"), 1, None)
        .await
        .expect("create");
    let id = RunId::parse("w1").expect("id");
    store
        .claim_runs(&Scope::All, "a", 10, 1000, 10, 5)
        .await
        .expect("claim");
    store
        .commit_turn(
            &lease("a"),
            &id,
            attempt_of(&store, &id).await,
            TurnCommit {
                checkpoints: vec![pending_step(0)],
                ..TurnCommit::new(TurnOutcome::Suspend { wake_at: Some(15) })
            },
            11,
        )
        .await
        .expect("commit");
    // A timer wakes the run for a second turn; the step's result arrives mid-turn.
    let claimed = store
        .claim_runs(&Scope::All, "a", 20, 1000, 10, 5)
        .await
        .expect("claim");
    assert_eq!(claimed.len(), 1, "a due timer makes the run claimable");
    let result = completed(&id, 0, json!(1));
    store
        .apply_step_result(&result, 22, None)
        .await
        .expect("apply")
        .expect("applies while running");
    let run = store
        .commit_turn(
            &lease("a"),
            &id,
            attempt_of(&store, &id).await,
            TurnCommit::new(TurnOutcome::Suspend { wake_at: None }),
            23,
        )
        .await
        .expect("commit")
        .expect("held")
        .run;
    assert_eq!(
        run.status,
        RunStatus::Running,
        "the woken run must stay claimed for its next turn"
    );
    assert_eq!(run.locked_by.as_deref(), Some("a"));
    assert_eq!(run.wake_at, None);
}

/// A result claims the suspended run it wakes (inside the claimer's scope only); a duplicate
/// result claims nothing.
pub async fn results_claim_the_runs_they_wake(store: Arc<dyn Store>) {
    for (id, namespace) in [("c1", "acme"), ("c2", "globex")] {
        suspended_on_a_step(&store, id, namespace).await;
    }
    let acme_driver = Claim {
        scope: Scope::Only(ns("acme")),
        ..lease("b")
    };
    let result = |id: &str| completed(&RunId::parse(id).expect("id"), 0, json!(1));
    let applied = store
        .apply_step_result(&result("c1"), 3, Some(&acme_driver))
        .await
        .expect("apply")
        .expect("applies");
    let history = applied.claimed.expect("claimed, with its history");
    assert_eq!(history.checkpoints.len(), 1);
    assert_eq!(
        history.checkpoints[0].status,
        CheckpointStatus::Completed,
        "the history handed over already holds the result"
    );
    assert_eq!(applied.run.status, RunStatus::Running);
    assert_eq!(applied.run.locked_by.as_deref(), Some("b"));
    let again = store
        .apply_step_result(&result("c1"), 4, Some(&lease("c")))
        .await
        .expect("apply");
    assert!(again.is_none(), "a duplicate is ignored");
    let run = store
        .get_run(&Scope::All, &RunId::parse("c1").expect("id"))
        .await
        .expect("get")
        .expect("exists");
    assert_eq!(
        run.locked_by.as_deref(),
        Some("b"),
        "a duplicate result must not move the lease"
    );
    let foreign = store
        .apply_step_result(&result("c2"), 5, Some(&acme_driver))
        .await
        .expect("apply")
        .expect("applies");
    assert!(
        foreign.claimed.is_none(),
        "a claim never reaches outside its scope"
    );
    assert_eq!(foreign.run.status, RunStatus::Suspended);
    assert_eq!(foreign.run.wake_at, Some(5), "but the run is woken");
}

/// The sticky fast path writes "result + turn" only for a run exactly as the caller left it.
pub async fn sticky_turns_commit_only_an_untouched_run(store: Arc<dyn Store>) {
    let suspend_on_step = |id: &'static str| {
        let store = store.clone();
        async move {
            let run = store
                .create_run(new_run(id, "acme"), 1, Some(&lease("a")))
                .await
                .expect("create");
            let commit = TurnCommit {
                checkpoints: vec![pending_step(0)],
                ..TurnCommit::new(TurnOutcome::Suspend { wake_at: None })
            };
            let committed = store
                .commit_turn(
                    &lease("a"),
                    &run.id,
                    attempt_of(&store, &run.id).await,
                    commit,
                    2,
                )
                .await
                .expect("commit")
                .expect("held");
            assert!(
                committed.history.is_none(),
                "the commit only appends: derived"
            );
            committed.run
        }
    };
    let result = |run: &crate::model::Run| StepResult {
        run_id: run.id.clone(),
        seq: 0,
        step_id: format!("{}:0", run.id),
        started_at: Some(3),
        outcome: StepOutcome::Completed { output: json!(7) },
        receipt: Default::default(),
    };
    let done = || TurnCommit::new(TurnOutcome::Complete(json!("done")));

    let untouched = suspend_on_step("k1").await;
    let committed = store
        .apply_result_and_commit(
            &result(&untouched),
            &lease("b"),
            untouched.attempt,
            done(),
            4,
        )
        .await
        .expect("write")
        .expect("an untouched run takes the fast path");
    assert_eq!(committed.run.status, RunStatus::Completed);
    let cps = store
        .checkpoints(&Scope::All, &untouched.id)
        .await
        .expect("read");
    assert_eq!(cps[0].status, CheckpointStatus::Completed);
    assert_eq!(cps[0].output, Some(json!(7)));
    assert!(
        store
            .apply_result_and_commit(
                &result(&untouched),
                &lease("b"),
                committed.run.attempt,
                done(),
                5
            )
            .await
            .expect("write")
            .is_none(),
        "a finished run is refused"
    );

    let turned_elsewhere = suspend_on_step("k2").await;
    let refused = store
        .apply_result_and_commit(
            &result(&turned_elsewhere),
            &lease("b"),
            turned_elsewhere.attempt + 1,
            done(),
            4,
        )
        .await
        .expect("write");
    assert!(
        refused.is_none(),
        "another claim since the cache was filled"
    );
    let woken = suspend_on_step("k3").await;
    store
        .send_signal(&Scope::All, &woken.id, "poke", &json!(1), 3)
        .await
        .expect("signal");
    let refused = store
        .apply_result_and_commit(&result(&woken), &lease("b"), woken.attempt, done(), 4)
        .await
        .expect("write");
    assert!(
        refused.is_none(),
        "a run woken since must turn the ordinary way"
    );
    let outside = store
        .apply_result_and_commit(
            &result(&turned_elsewhere),
            &Claim {
                scope: Scope::Only(ns("globex")),
                ..lease("b")
            },
            turned_elsewhere.attempt,
            done(),
            4,
        )
        .await
        .expect("write");
    assert!(outside.is_none(), "never outside the claim's scope");
    // A repeated result for a step already settled, on a run that is otherwise untouched: the
    // whole write backs out, new checkpoints included.
    let run = store
        .create_run(new_run("k4", "acme"), 1, Some(&lease("a")))
        .await
        .expect("create");
    let fan_out = TurnCommit {
        checkpoints: vec![pending_step(0), pending_step(1)],
        ..TurnCommit::new(TurnOutcome::Suspend { wake_at: None })
    };
    let fanned = store
        .commit_turn(
            &lease("a"),
            &run.id,
            attempt_of(&store, &run.id).await,
            fan_out,
            2,
        )
        .await
        .expect("commit")
        .expect("held")
        .run;
    let still_waiting = || TurnCommit::new(TurnOutcome::Suspend { wake_at: None });
    let first = store
        .apply_result_and_commit(
            &result(&fanned),
            &lease("b"),
            fanned.attempt,
            still_waiting(),
            4,
        )
        .await
        .expect("write")
        .expect("the first result is taken")
        .run;
    let with_new_step = TurnCommit {
        checkpoints: vec![pending_step(2)],
        ..still_waiting()
    };
    let repeated = store
        .apply_result_and_commit(
            &result(&fanned),
            &lease("b"),
            first.attempt,
            with_new_step,
            5,
        )
        .await
        .expect("write");
    assert!(repeated.is_none(), "a repeated result is refused");
    let after = store
        .get_run(&Scope::All, &fanned.id)
        .await
        .expect("get")
        .expect("exists");
    assert_eq!(
        (after.status, after.attempt, after.updated_at),
        (first.status, first.attempt, first.updated_at),
        "the refused write left the run as it was"
    );
    let cps = store
        .checkpoints(&Scope::All, &fanned.id)
        .await
        .expect("read");
    assert_eq!(
        cps.len(),
        2,
        "the refused write added no checkpoint: {cps:?}"
    );
    for id in [&turned_elsewhere.id, &woken.id] {
        let run = store
            .get_run(&Scope::All, id)
            .await
            .expect("get")
            .expect("exists");
        assert_eq!(run.status, RunStatus::Suspended, "a refusal writes nothing");
        let cps = store.checkpoints(&Scope::All, id).await.expect("read");
        assert_eq!(
            cps[0].status,
            CheckpointStatus::Pending,
            "a refusal writes nothing"
        );
    }
}
