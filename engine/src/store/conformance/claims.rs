//! Claims and leases: a lease is exclusive until it expires or is released, racing drivers
//! split the runs, and a run whose leases keep lapsing is recovered only so often.

use std::sync::Arc;

use serde_json::json;

use super::support::{attempt_of, lease, new_run, ns};
use crate::model::{RunStatus, Scope};
use crate::store::{Store, TurnCommit, TurnOutcome};

/// A claimed run is leased to one owner; nobody else claims it until the lease expires, and
/// only the owner can commit its turn.
pub async fn leases_are_exclusive_until_they_expire(store: Arc<dyn Store>) {
    store
        .create_run(new_run("l1", "acme"), 1, None)
        .await
        .expect("create");
    let a = store
        .claim_runs(&Scope::All, "a", 10, 100, 10, 5)
        .await
        .expect("claim");
    assert_eq!(a.len(), 1);
    assert_eq!(a[0].status, RunStatus::Running);
    assert_eq!(a[0].locked_by.as_deref(), Some("a"));
    assert!(
        store
            .claim_runs(&Scope::All, "b", 50, 100, 10, 5)
            .await
            .expect("claim")
            .is_empty(),
        "a live lease is exclusive"
    );
    let b = store
        .claim_runs(&Scope::All, "b", 111, 100, 10, 5)
        .await
        .expect("claim");
    assert_eq!(b.len(), 1, "an expired lease is taken over");
    let commit = TurnCommit::new(TurnOutcome::Complete(json!(1)));
    let stale = store
        .commit_turn(&lease("a"), &b[0].id, a[0].attempt, commit.clone(), 120)
        .await
        .expect("commit");
    assert!(stale.is_none(), "the old owner's commit must be refused");
    let done = store
        .commit_turn(&lease("b"), &b[0].id, b[0].attempt, commit, 121)
        .await
        .expect("commit")
        .expect("owner commits")
        .run;
    assert_eq!(done.status, RunStatus::Completed);
    assert_eq!(done.finished_at, Some(121));
    assert!(
        store
            .claim_runs(&Scope::All, "c", 10_000, 100, 10, 5)
            .await
            .expect("claim")
            .is_empty(),
        "a finished run is never claimed"
    );
}

/// Releasing leases makes the runs claimable at once, by anyone.
pub async fn released_leases_are_claimable_at_once(store: Arc<dyn Store>) {
    store
        .create_run(new_run("x1", "acme"), 1, None)
        .await
        .expect("create");
    store
        .claim_runs(&Scope::All, "a", 10, 100_000, 10, 5)
        .await
        .expect("claim");
    assert_eq!(store.release_leases("a", 11).await.expect("release"), 1);
    assert_eq!(
        store
            .claim_runs(&Scope::All, "b", 12, 100, 10, 5)
            .await
            .expect("claim")
            .len(),
        1
    );
}

/// Racing claims (several drivers at once) never hand one run to two drivers, and every
/// runnable run goes to one of them.
pub async fn racing_claims_split_the_runs(store: Arc<dyn Store>) {
    for i in 0..24 {
        store
            .create_run(new_run(&format!("race-{i}"), "acme"), 1, None)
            .await
            .expect("create");
    }
    let claims = (0..6).map(|d| {
        let store = store.clone();
        async move {
            store
                .claim_runs(&Scope::All, &format!("driver-{d}"), 10, 1000, 5, 5)
                .await
                .expect("claim")
        }
    });
    let mut taken: Vec<String> = futures::future::join_all(claims)
        .await
        .into_iter()
        .flatten()
        .map(|r| r.id.to_string())
        .collect();
    let claimed = taken.len();
    taken.sort();
    taken.dedup();
    assert_eq!(taken.len(), claimed, "a run was claimed twice");
    assert_eq!(claimed, 24, "6 drivers × 5 slots take all 24 runs");
}

/// A run whose lease expired `max_recoveries` times is no longer taken over: the sweep buries
/// it as `dead`, with the reason, and nothing claims it again.
pub async fn exhausted_recoveries_bury_the_run(store: Arc<dyn Store>) {
    store
        .create_run(new_run("d1", "acme"), 1, None)
        .await
        .expect("create");
    let mut t = 10;
    for round in 0..3 {
        let claimed = store
            .claim_runs(&Scope::All, "a", t, 10, 10, 2)
            .await
            .expect("claim");
        assert_eq!(
            claimed.len(),
            1,
            "round {round}: an expired lease is recovered"
        );
        t += 11;
    }
    assert!(
        store
            .claim_runs(&Scope::All, "a", t, 10, 10, 2)
            .await
            .expect("claim")
            .is_empty(),
        "after two recoveries the run is not taken over again"
    );
    let globex = Scope::Only(ns("globex"));
    assert!(
        store
            .sweep_abandoned(&globex, 2, t)
            .await
            .expect("sweep")
            .is_empty(),
        "sweeps are scoped"
    );
    let dead = store
        .sweep_abandoned(&Scope::All, 2, t)
        .await
        .expect("sweep");
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].status, RunStatus::Dead);
    assert_eq!(
        dead[0].error.as_ref().and_then(|e| e.code.as_deref()),
        Some("dead")
    );
    assert!(
        store
            .claim_runs(&Scope::All, "a", t + 1000, 10, 10, 2)
            .await
            .expect("claim")
            .is_empty()
    );
}

/// A committed turn is progress: the run's count of recoveries starts again, so a run that
/// lives long is not buried for lapses far apart (each one after its driver crashed, say).
pub async fn a_committed_turn_resets_the_recovery_count(store: Arc<dyn Store>) {
    let run = store
        .create_run(new_run("r1", "acme"), 1, None)
        .await
        .expect("create");
    // Claimed, then recovered twice (of two allowed): one more lapse would bury it.
    let mut t = 10;
    for _ in 0..3 {
        let claimed = store
            .claim_runs(&Scope::All, "a", t, 10, 10, 2)
            .await
            .expect("claim");
        assert_eq!(claimed.len(), 1);
        t += 11;
    }
    // The driver holding it now commits a turn; the run suspends until a timer.
    let commit = TurnCommit::new(TurnOutcome::Suspend {
        wake_at: Some(t - 5),
    });
    store
        .commit_turn(
            &lease("a"),
            &run.id,
            attempt_of(&store, &run.id).await,
            commit,
            t - 8,
        )
        .await
        .expect("commit")
        .expect("held");
    // The timer wakes it, and that driver's lease lapses too: taken over once more.
    let woken = store
        .claim_runs(&Scope::All, "a", t, 10, 10, 2)
        .await
        .expect("claim");
    assert_eq!(woken.len(), 1);
    let recovered = store
        .claim_runs(&Scope::All, "b", t + 11, 10, 10, 2)
        .await
        .expect("claim");
    assert_eq!(
        recovered.len(),
        1,
        "the lapses before the committed turn no longer count"
    );
}
