//! Blocked (parked) runs: un-parked by a served version or a recheck time, inside their scope,
//! keeping the results of steps still out.

use std::sync::Arc;

use serde_json::json;

use super::support::{attempt_of, lease, new_run, ns, pending_step};
use crate::model::{CheckpointStatus, Millis, RunStatus, Scope, StepOutcome, StepResult};
use crate::store::{Store, TurnCommit, TurnOutcome};

/// A blocked run is un-parked only by a process serving its exact version, inside its scope.
pub async fn blocked_runs_unpark_when_their_version_is_served(store: Arc<dyn Store>) {
    let run = store
        .create_run(new_run("b1", "acme"), 1, Some(&lease("a")))
        .await
        .expect("create");
    let reason = crate::model::StepFailure::new("no worker serves wf v1").with_code("no_worker");
    let blocked = store
        .commit_turn(
            &lease("a"),
            &run.id,
            attempt_of(&store, &run.id).await,
            TurnCommit::new(TurnOutcome::Block {
                reason,
                recheck_at: None,
            }),
            2,
        )
        .await
        .expect("commit")
        .expect("held")
        .run;
    assert_eq!(blocked.status, RunStatus::Blocked);
    let other_version = store
        .unblock_runs(&Scope::All, &[("wf".into(), 2), ("other".into(), 1)], 3)
        .await
        .expect("unblock");
    assert!(
        other_version.is_empty(),
        "only the pinned version un-parks it"
    );
    let other_tenant = store
        .unblock_runs(&Scope::Only(ns("globex")), &[("wf".into(), 1)], 3)
        .await
        .expect("unblock");
    assert!(other_tenant.is_empty(), "never outside the scope");
    let unparked = store
        .unblock_runs(&Scope::Only(ns("acme")), &[("wf".into(), 1)], 4)
        .await
        .expect("unblock");
    assert_eq!(unparked.len(), 1);
    assert_eq!(unparked[0].status, RunStatus::Pending);
    assert_eq!(unparked[0].error, None);
}

/// A run parked with a recheck time goes back to `pending` once it passes, inside its scope
/// only; a run parked without one stays parked.
pub async fn blocked_runs_with_a_recheck_time_wake_when_it_passes(store: Arc<dyn Store>) {
    let park = |id: &'static str, recheck_at: Option<Millis>| {
        let store = store.clone();
        async move {
            let run = store
                .create_run(new_run(id, "acme"), 1, Some(&lease("a")))
                .await
                .expect("create");
            let reason =
                crate::model::StepFailure::new("blocked: no compatible worker (requires saga)")
                    .with_code("capability.unavailable");
            let outcome = TurnOutcome::Block { reason, recheck_at };
            let parked = store
                .commit_turn(
                    &lease("a"),
                    &run.id,
                    attempt_of(&store, &run.id).await,
                    TurnCommit::new(outcome),
                    2,
                )
                .await
                .expect("commit")
                .expect("held")
                .run;
            assert_eq!(parked.status, RunStatus::Blocked);
            assert_eq!(parked.wake_at, recheck_at);
            parked
        }
    };
    let rechecked = park("wb1", Some(100)).await;
    park("wb2", None).await;
    assert!(
        store
            .wake_blocked(&Scope::All, 99)
            .await
            .expect("wake")
            .is_empty(),
        "not before its recheck time"
    );
    assert!(
        store
            .wake_blocked(&Scope::Only(ns("globex")), 100)
            .await
            .expect("wake")
            .is_empty(),
        "never outside the scope"
    );
    let woken = store
        .wake_blocked(&Scope::Only(ns("acme")), 100)
        .await
        .expect("wake");
    assert_eq!(
        woken.len(),
        1,
        "only the run with a recheck time: {woken:?}"
    );
    assert_eq!(woken[0].id, rechecked.id);
    assert_eq!(woken[0].status, RunStatus::Pending);
    assert_eq!(
        woken[0].error.as_ref().and_then(|e| e.code.as_deref()),
        Some("capability.unavailable"),
        "it keeps its reason for the turn that looks again"
    );
    assert_eq!(woken[0].wake_at, None);
    let claimed = store
        .claim_runs(&Scope::All, "b", 101, 1_000, 10, 3)
        .await
        .expect("claim");
    assert_eq!(
        claimed.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        ["wb1"],
        "the woken run is claimed for its next turn; the other stays parked"
    );
    park("wb3", Some(10_000)).await;
    let unparked = store
        .unblock_runs(&Scope::All, &[("wf".into(), 1)], 102)
        .await
        .expect("unblock");
    assert_eq!(
        unparked.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        ["wb2"],
        "a served version un-parks only a run that waits for one, not one waiting for a worker"
    );
}

/// A run parked while one of its steps is still out keeps that step's result, stays parked,
/// and is not claimed for it; its next turn, once woken, replays the result.
pub async fn a_parked_run_keeps_results_of_steps_still_out(store: Arc<dyn Store>) {
    let run = store
        .create_run(new_run("pk1", "acme"), 1, Some(&lease("a")))
        .await
        .expect("create");
    let reason = crate::model::StepFailure::new("blocked: no compatible worker (requires saga)");
    let commit = TurnCommit {
        checkpoints: vec![pending_step(0)],
        ..TurnCommit::new(TurnOutcome::Block {
            reason,
            recheck_at: Some(50),
        })
    };
    store
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
    let result = StepResult {
        run_id: run.id.clone(),
        seq: 0,
        step_id: format!("{}:0", run.id),
        started_at: Some(3),
        outcome: StepOutcome::Completed { output: json!(7) },
        receipt: Default::default(),
    };
    let applied = store
        .apply_step_result(&result, 4, Some(&lease("b")))
        .await
        .expect("apply")
        .expect("a parked run keeps the result");
    assert_eq!(applied.run.status, RunStatus::Blocked);
    assert!(applied.claimed.is_none(), "a parked run is not claimed");
    assert_eq!(applied.checkpoint.status, CheckpointStatus::Completed);
    assert_eq!(applied.checkpoint.output, Some(json!(7)));
    assert!(
        store
            .apply_step_result(&result, 5, None)
            .await
            .expect("apply")
            .is_none(),
        "still once only"
    );
    let woken = store.wake_blocked(&Scope::All, 50).await.expect("wake");
    assert_eq!(woken.len(), 1);
}
