//! Control verbs: lease renewal, dispatch marks, compare-and-set status changes, retries,
//! buffered signals, and a parent's cancel of a child that continued as new.

use std::sync::Arc;

use serde_json::json;

use super::support::{attempt_of, lease, new_run, ns, pending_step};
use crate::model::{
    CheckpointKind, CheckpointStatus, RunId, RunStatus, Scope, StepOutcome, StepResult,
};
use crate::store::{NewCheckpoint, NewRun, RunPatch, Store, TurnCommit, TurnOutcome};

/// Lease renewal, dispatch marks, compare-and-set control verbs, retry from the last good
/// checkpoint and buffered signals, each inside its scope.
pub async fn control_verbs_and_leases_follow_their_rules(store: Arc<dyn Store>) {
    let (acme, globex) = (Scope::Only(ns("acme")), Scope::Only(ns("globex")));
    let run = store
        .create_run(new_run("v1", "acme"), 1, Some(&lease("a")))
        .await
        .expect("create");
    assert_eq!(
        store
            .renew_leases("b", std::slice::from_ref(&run.id), 20_000)
            .await
            .expect("renew"),
        0
    );
    assert_eq!(
        store
            .renew_leases("a", std::slice::from_ref(&run.id), 20_000)
            .await
            .expect("renew"),
        1
    );
    let renewed = store
        .get_run(&acme, &run.id)
        .await
        .expect("get")
        .expect("visible");
    assert_eq!(renewed.locked_until, Some(20_000));

    // A turn: one step completed, one still pending; then the run suspends.
    let mut done = pending_step(0);
    done.status = CheckpointStatus::Completed;
    done.output = Some(json!(1));
    let commit = TurnCommit {
        checkpoints: vec![done, pending_step(1)],
        ..TurnCommit::new(TurnOutcome::Suspend { wake_at: None })
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
    store
        .mark_dispatched(&run.id, 1, "a", 77)
        .await
        .expect("mark");
    let cps = store.checkpoints(&acme, &run.id).await.expect("read");
    assert_eq!(cps[1].enqueued_at, Some(77));

    // Signals: buffered in order, only for a visible, unfinished run.
    assert!(matches!(
        store
            .send_signal(&globex, &run.id, "go", &json!(1), 3)
            .await
            .expect("signal"),
        crate::store::SignalSent::NotFound
    ));
    for n in [1, 2] {
        let sent = store
            .send_signal(&acme, &run.id, "go", &json!(n), 3)
            .await
            .expect("signal");
        assert!(matches!(sent, crate::store::SignalSent::Delivered(_)));
    }
    let buffered = store.buffered_signals(&run.id).await.expect("buffered");
    assert_eq!(
        buffered
            .iter()
            .map(|s| s.payload.clone())
            .collect::<Vec<_>>(),
        [json!(1), json!(2)]
    );

    // The pending step fails for good (it has no retry policy).
    let failure = StepResult {
        run_id: run.id.clone(),
        seq: 1,
        step_id: "v1:1".into(),
        started_at: None,
        outcome: StepOutcome::Failed {
            error: crate::model::StepFailure::new("card declined"),
        },
        receipt: Default::default(),
    };
    let applied = store
        .apply_step_result(&failure, 3, None)
        .await
        .expect("apply")
        .expect("applies");
    assert_eq!(applied.checkpoint.status, CheckpointStatus::Failed);

    // The workflow handles the failure and takes the first buffered signal at a later
    // position; the retry below, which drops everything from the failed step on, must give
    // that signal back, or the wait would find nothing when the run gets there again.
    let claimed = store
        .claim_runs(&acme, "a", 3, 10_000, 10, 5)
        .await
        .expect("claim");
    assert_eq!(claimed.iter().map(|r| &r.id).collect::<Vec<_>>(), [&run.id]);
    let wait = NewCheckpoint {
        seq: 2,
        kind: CheckpointKind::Signal,
        name: "go".into(),
        status: CheckpointStatus::Pending,
        worker_group: None,
        input: None,
        output: None,
        error: None,
        wake_at: None,
        enqueued_at: None,
        started_at: Some(3),
        finished_at: None,
        retry_policy: None,
        timeout_ms: None,
        priority: None,
        slot: None,
        saga: None,
        route: None,
    };
    let commit = TurnCommit {
        checkpoints: vec![wait],
        consumed_signals: vec![(buffered[0].id, 2)],
        ..TurnCommit::new(TurnOutcome::Suspend { wake_at: None })
    };
    store
        .commit_turn(
            &lease("a"),
            &run.id,
            attempt_of(&store, &run.id).await,
            commit,
            3,
        )
        .await
        .expect("commit")
        .expect("held");
    assert_eq!(
        store
            .buffered_signals(&run.id)
            .await
            .expect("buffered")
            .len(),
        1,
        "the wait took one signal"
    );

    // Compare-and-set: the wrong expected status or scope changes nothing.
    let fail = RunPatch {
        status: RunStatus::Failed,
        error: Some(crate::model::StepFailure::new("boom")),
    };
    assert!(
        store
            .update_run_if(&acme, &run.id, &[RunStatus::Pending], fail.clone(), 4)
            .await
            .expect("cas")
            .is_none()
    );
    assert!(
        store
            .update_run_if(&globex, &run.id, &[RunStatus::Suspended], fail.clone(), 4)
            .await
            .expect("cas")
            .is_none()
    );
    let failed = store
        .update_run_if(&acme, &run.id, &[RunStatus::Suspended], fail, 4)
        .await
        .expect("cas")
        .expect("moved");
    assert_eq!(
        (failed.status, failed.finished_at),
        (RunStatus::Failed, Some(4))
    );
    assert!(matches!(
        store
            .send_signal(&acme, &run.id, "go", &json!(3), 5)
            .await
            .expect("signal"),
        crate::store::SignalSent::RunFinished(_)
    ));

    // Retry: from the last good checkpoint, in scope only, and only a failed or dead run.
    assert!(
        store
            .retry_run(&globex, &run.id, 6)
            .await
            .expect("retry")
            .is_none()
    );
    let retried = store
        .retry_run(&acme, &run.id, 6)
        .await
        .expect("retry")
        .expect("retried");
    assert_eq!(
        (retried.status, retried.error.clone()),
        (RunStatus::Pending, None)
    );
    let cps = store.checkpoints(&acme, &run.id).await.expect("read");
    assert_eq!(
        cps.iter().map(|c| (c.seq, c.status)).collect::<Vec<_>>(),
        [(0, CheckpointStatus::Completed)],
        "the failed step is dropped so it runs again; the completed one is kept"
    );
    let back = store.buffered_signals(&run.id).await.expect("buffered");
    assert_eq!(
        back.iter().map(|s| s.payload.clone()).collect::<Vec<_>>(),
        [json!(1), json!(2)],
        "a signal taken after the failed step is buffered again, in its order"
    );
    assert!(
        store
            .retry_run(&acme, &run.id, 7)
            .await
            .expect("retry")
            .is_none(),
        "a pending run is not retried"
    );
}

/// A parent cancelling a child that continued as new (a fail-fast gather) cancels the child's
/// live successor, which carries on under `<child>:c<n>`, and no other run.
pub async fn cancelling_a_continued_child_cancels_its_successor(store: Arc<dyn Store>) {
    let id = |s: &str| RunId::parse(s).expect("id");
    let child_of = |parent: &str, child: &str| NewRun {
        parent_run_id: Some(id(parent)),
        root_run_id: id(parent),
        nesting_depth: 1,
        ..new_run(child, "acme")
    };
    // The parent starts a child and waits; a bystander's child has a look-alike id.
    for parent in ["k1", "k2"] {
        let child = format!("{parent}.child.0");
        let start = TurnCommit {
            children: vec![child_of(parent, &child)],
            ..TurnCommit::new(TurnOutcome::Suspend { wake_at: Some(2) })
        };
        store
            .create_run_and_commit(new_run(parent, "acme"), &lease("a"), start, 1)
            .await
            .expect("start")
            .expect("in scope");
    }
    let claimed = store
        .claim_runs(&Scope::All, "a", 2, 10_000, 10, 5)
        .await
        .expect("claim");
    assert_eq!(claimed.len(), 4, "both parents and both children");
    // The child continues as new.
    let successor = NewRun {
        continued_from: Some(id("k1.child.0")),
        ..child_of("k1", "k1.child.0:c1")
    };
    store
        .commit_turn(
            &lease("a"),
            &id("k1.child.0"),
            attempt_of(&store, &id("k1.child.0")).await,
            TurnCommit::new(TurnOutcome::Continue(Box::new(successor))),
            3,
        )
        .await
        .expect("commit")
        .expect("held");
    // The parent cancels it.
    let cancel = TurnCommit {
        cancel_runs: vec![id("k1.child.0")],
        ..TurnCommit::new(TurnOutcome::Suspend { wake_at: None })
    };
    let committed = store
        .commit_turn(
            &lease("a"),
            &id("k1"),
            attempt_of(&store, &id("k1")).await,
            cancel,
            4,
        )
        .await
        .expect("commit")
        .expect("held");
    assert_eq!(
        committed.cancelled,
        [id("k1.child.0:c1")],
        "the commit names the run it cancelled, to announce"
    );
    let status = |run: &'static str| {
        let store = store.clone();
        async move {
            store
                .get_run(&Scope::All, &id(run))
                .await
                .expect("read")
                .expect("exists")
                .status
        }
    };
    assert_eq!(status("k1.child.0:c1").await, RunStatus::Cancelled);
    assert_eq!(status("k1.child.0").await, RunStatus::Continued);
    assert_eq!(
        status("k2.child.0").await,
        RunStatus::Running,
        "another parent's child is untouched"
    );
}
