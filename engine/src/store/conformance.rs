//! The store conformance suite: one `pub async fn` per behaviour, each taking a fresh store.
//! Every backend stamps the whole suite with [`crate::store_conformance!`], so each case shows up
//! as its own test.

use std::sync::Arc;

use serde_json::json;

use super::{
    Claim, History, LostDispatch, NewCheckpoint, NewRun, RunPatch, Store, StoreError, TurnCommit,
    TurnOutcome,
};
use crate::model::{
    CheckpointKind, CheckpointStatus, Millis, Namespace, Run, RunId, RunQuery, RunStatus, Scope,
    StepOutcome, StepResult,
};

/// The attempt `id` is at now: what a turn of the claim that holds it commits with. Shared
/// with the integration tests, which commit turns as another control plane.
pub async fn attempt_of(store: &Arc<dyn Store>, id: &RunId) -> u32 {
    store
        .get_run(&Scope::All, id)
        .await
        .expect("read")
        .expect("the run exists")
        .attempt
}

fn ns(s: &str) -> Namespace {
    Namespace::parse(s).expect("test namespace")
}

fn new_run(id: &str, namespace: &str) -> NewRun {
    NewRun::top_level(
        RunId::parse(id).expect("test id"),
        ns(namespace),
        "wf",
        1,
        json!({"n": 1}),
    )
}

fn lease(owner: &str) -> Claim {
    Claim {
        scope: Scope::All,
        owner: owner.to_owned(),
        until: 10_000,
    }
}

/// Lease `a`, scoped to `namespace`.
fn lease_in(namespace: &str) -> Claim {
    Claim {
        scope: Scope::Only(ns(namespace)),
        ..lease("a")
    }
}

/// A turn that dispatches remote step `seq` and suspends on it.
fn suspend_on_step(seq: u32) -> TurnCommit {
    TurnCommit {
        checkpoints: vec![pending_step(seq)],
        ..TurnCommit::new(TurnOutcome::Suspend { wake_at: None })
    }
}

/// Remote step `seq` of run `id` completed with `output`, as its worker reports it.
fn completed(id: &RunId, seq: u32, output: serde_json::Value) -> StepResult {
    StepResult {
        run_id: id.clone(),
        seq,
        step_id: format!("{id}:{seq}"),
        started_at: None,
        outcome: StepOutcome::Completed { output },
    }
}

/// Run `id` of `namespace`, whose first turn (under lease `a`) dispatched remote step 0 and
/// suspended.
async fn suspended_on_a_step(store: &Arc<dyn Store>, id: &str, namespace: &str) -> Run {
    suspended_on_a_step_sent_by(store, id, namespace, "a").await
}

/// Like [`suspended_on_a_step`], the turn under lease `owner`, which sends the step.
async fn suspended_on_a_step_sent_by(
    store: &Arc<dyn Store>,
    id: &str,
    namespace: &str,
    owner: &str,
) -> Run {
    let run = store
        .create_run(new_run(id, namespace), 1, Some(&lease(owner)))
        .await
        .expect("create");
    let commit = TurnCommit {
        checkpoints: vec![pending_step(0)],
        ..TurnCommit::new(TurnOutcome::Suspend { wake_at: None })
    };
    store
        .commit_turn(
            &lease(owner),
            &run.id,
            attempt_of(store, &run.id).await,
            commit,
            2,
        )
        .await
        .expect("commit")
        .expect("held")
        .run
}

fn pending_step(seq: u32) -> NewCheckpoint {
    NewCheckpoint::remote_step(
        seq,
        "charge".into(),
        "charge@acme".into(),
        json!({"amount": 5}),
        10,
    )
}

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

/// Reads through a namespace scope never see another namespace's runs or checkpoints.
pub async fn scoped_reads_never_cross_namespaces(store: Arc<dyn Store>) {
    store
        .create_run(new_run("a1", "acme"), 1, None)
        .await
        .expect("create");
    store
        .create_run(new_run("g1", "globex"), 2, None)
        .await
        .expect("create");
    let acme = Scope::Only(ns("acme"));
    let g1 = RunId::parse("g1").expect("id");
    assert!(
        store.get_run(&acme, &g1).await.expect("get").is_none(),
        "acme must not read a globex run"
    );
    assert!(
        store.checkpoints(&acme, &g1).await.expect("cps").is_empty(),
        "acme must not read globex checkpoints"
    );
    let page = store
        .list_runs(&acme, &RunQuery::default())
        .await
        .expect("list");
    assert_eq!(
        page.runs.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        vec!["a1"]
    );
    let counts = store.count_by_status(&acme).await.expect("counts");
    assert_eq!(
        counts.iter().map(|c| c.count).sum::<u64>(),
        1,
        "facets must be scoped too"
    );
    let all = store
        .list_runs(&Scope::All, &RunQuery::default())
        .await
        .expect("list all");
    assert_eq!(all.runs.len(), 2, "the operator sees every namespace");
    let claimed = store
        .claim_runs(&acme, "me", 10, 1000, 10, 5)
        .await
        .expect("claim");
    assert_eq!(
        claimed.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        vec!["a1"],
        "driver scans are scoped"
    );
}

/// Listing is newest first and pages with a keyset cursor without gaps or repeats.
pub async fn pages_follow_the_keyset_order(store: Arc<dyn Store>) {
    for i in 0..7 {
        store
            .create_run(new_run(&format!("p{i}"), "acme"), 1000 + (i / 2), None)
            .await
            .expect("create");
    }
    let mut seen = Vec::new();
    let mut query = RunQuery {
        limit: 3,
        ..RunQuery::default()
    };
    loop {
        let page = store
            .list_runs(&Scope::Only(ns("acme")), &query)
            .await
            .expect("list");
        seen.extend(page.runs.iter().map(|r| (r.created_at, r.id.to_string())));
        match page.next_cursor {
            Some(c) => query.cursor = Some(c),
            None => break,
        }
    }
    let mut expected = seen.clone();
    expected.sort_by(|a, b| b.cmp(a));
    expected.dedup();
    assert_eq!(seen.len(), 7, "every run appears once");
    assert_eq!(seen, expected, "pages are newest first by (created_at, id)");
}

/// Filters on status and workflow apply.
pub async fn list_filters_apply(store: Arc<dyn Store>) {
    store
        .create_run(new_run("f1", "acme"), 1, None)
        .await
        .expect("create");
    let mut other = new_run("f2", "acme");
    other.workflow = "other".into();
    store.create_run(other, 2, None).await.expect("create");
    let q = RunQuery {
        workflow: Some("other".into()),
        ..RunQuery::default()
    };
    let page = store.list_runs(&Scope::All, &q).await.expect("list");
    assert_eq!(page.runs.len(), 1);
    assert_eq!(page.runs[0].workflow, "other");
    let q = RunQuery {
        status: Some(RunStatus::Completed),
        ..RunQuery::default()
    };
    assert!(
        store
            .list_runs(&Scope::All, &q)
            .await
            .expect("list")
            .runs
            .is_empty()
    );
}

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

/// Tags, search attributes and time ranges filter lists; facets count by status, workflow, tag
/// and attribute value, each inside the reader's scope only.
pub async fn filters_and_facets_stay_inside_the_scope(store: Arc<dyn Store>) {
    let plant = |id: &'static str,
                 namespace: &'static str,
                 workflow: &'static str,
                 tags: &[&str],
                 region: Option<serde_json::Value>,
                 at: i64| {
        let store = store.clone();
        let mut run = NewRun::top_level(
            RunId::parse(id).expect("id"),
            ns(namespace),
            workflow,
            1,
            json!(null),
        );
        run.tags = tags.iter().map(|t| (*t).to_owned()).collect();
        if let Some(region) = region {
            run.search_attributes.insert("region".into(), region);
            run.search_attributes.insert("tier.level".into(), json!(2));
        }
        async move { store.create_run(run, at, None).await.expect("create") }
    };
    plant(
        "f-a1",
        "acme",
        "order",
        &["vip", "eu"],
        Some(json!("eu-west")),
        10,
    )
    .await;
    plant(
        "f-a2",
        "acme",
        "order",
        &["vip"],
        Some(json!("us-east")),
        20,
    )
    .await;
    plant(
        "f-a3",
        "acme",
        "refund",
        &["eu"],
        Some(json!("eu-west")),
        30,
    )
    .await;
    plant("f-a4", "acme", "refund", &[], None, 40).await;
    plant(
        "f-g1",
        "globex",
        "order",
        &["vip", "secret"],
        Some(json!("eu-west")),
        50,
    )
    .await;
    let acme = Scope::Only(ns("acme"));
    let ids = |page: crate::model::RunPage| {
        page.runs
            .into_iter()
            .map(|r| r.id.to_string())
            .collect::<Vec<_>>()
    };
    let by_tag = RunQuery {
        tag: Some("vip".into()),
        ..RunQuery::default()
    };
    assert_eq!(
        ids(store.list_runs(&acme, &by_tag).await.expect("list")),
        ["f-a2", "f-a1"]
    );
    assert_eq!(
        ids(store.list_runs(&Scope::All, &by_tag).await.expect("list")),
        ["f-g1", "f-a2", "f-a1"],
        "the operator sees every namespace"
    );
    let by_attribute = RunQuery {
        attribute: Some(
            crate::model::AttributeFilter::new("region", json!("eu-west")).expect("filter"),
        ),
        ..RunQuery::default()
    };
    assert_eq!(
        ids(store.list_runs(&acme, &by_attribute).await.expect("list")),
        ["f-a3", "f-a1"]
    );
    let dotted = RunQuery {
        attribute: Some(
            crate::model::AttributeFilter::new("tier.level", json!(2)).expect("filter"),
        ),
        workflow: Some("order".into()),
        tag: Some("eu".into()),
        ..RunQuery::default()
    };
    assert_eq!(
        ids(store.list_runs(&acme, &dotted).await.expect("list")),
        ["f-a1"]
    );
    let window = RunQuery {
        created_from: Some(20),
        created_until: Some(40),
        ..RunQuery::default()
    };
    assert_eq!(
        ids(store.list_runs(&acme, &window).await.expect("list")),
        ["f-a3", "f-a2"]
    );

    let facets = store.facets(&acme).await.expect("facets");
    assert_eq!(facets.statuses.len(), 1);
    assert_eq!(facets.statuses[0].count, 4);
    let counts = |v: &[crate::model::ValueCount]| {
        v.iter()
            .map(|c| (c.value.clone(), c.count))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        counts(&facets.workflows),
        [(json!("order"), 2), (json!("refund"), 2)]
    );
    assert_eq!(
        counts(&facets.tags),
        [(json!("eu"), 2), (json!("vip"), 2)],
        "globex's `secret` tag is not counted for acme"
    );
    let all = store.facets(&Scope::All).await.expect("facets");
    assert_eq!(counts(&all.tags)[0], (json!("vip"), 3));
    let regions = store.value_facets(&acme, "region").await.expect("values");
    assert_eq!(
        counts(&regions),
        [(json!("eu-west"), 2), (json!("us-east"), 1)]
    );
    let levels = store
        .value_facets(&acme, "tier.level")
        .await
        .expect("values");
    assert_eq!(counts(&levels), [(json!(2), 3)]);
    assert!(
        store
            .value_facets(&Scope::Only(ns("initech")), "region")
            .await
            .expect("values")
            .is_empty()
    );
}

/// The family filter finds a run and everything started under it, inside the scope; the
/// operator's per-namespace load counts live runs and recent failures only.
pub async fn families_and_loads_follow_the_scope(store: Arc<dyn Store>) {
    let root = store
        .create_run(new_run("fam-root", "acme"), 10, None)
        .await
        .expect("root");
    let mut child = new_run("fam-root.child.0", "acme");
    child.parent_run_id = Some(root.id.clone());
    child.root_run_id = root.id.clone();
    store.create_run(child, 20, None).await.expect("child");
    store
        .create_run(new_run("fam-other", "acme"), 30, None)
        .await
        .expect("other");
    let acme = Scope::Only(ns("acme"));
    let family = |id: &str| RunQuery {
        family: Some(RunId::parse(id).expect("id")),
        ..RunQuery::default()
    };
    let ids = |page: crate::model::RunPage| {
        page.runs
            .into_iter()
            .map(|r| r.id.to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        ids(store
            .list_runs(&acme, &family("fam-root"))
            .await
            .expect("list")),
        ["fam-root.child.0", "fam-root"]
    );
    assert_eq!(
        ids(store
            .list_runs(&acme, &family("fam-root.child.0"))
            .await
            .expect("list")),
        ["fam-root.child.0"],
        "a child's family filter is the child itself"
    );
    assert!(
        store
            .list_runs(&Scope::Only(ns("globex")), &family("fam-root"))
            .await
            .expect("list")
            .runs
            .is_empty(),
        "another tenant's family is invisible"
    );

    // Loads: acme has 3 pending; one globex run failed recently, one long ago, one is blocked.
    for (id, status, at) in [
        ("load-g1", RunStatus::Failed, 5_000),
        ("load-g2", RunStatus::Failed, 100),
        ("load-g3", RunStatus::Blocked, 100),
    ] {
        store
            .create_run(new_run(id, "globex"), 50, None)
            .await
            .expect("globex run");
        let patch = RunPatch {
            status,
            error: None,
        };
        store
            .update_run_if(
                &Scope::All,
                &RunId::parse(id).expect("id"),
                &[RunStatus::Pending],
                patch,
                at,
            )
            .await
            .expect("update")
            .expect("was pending");
    }
    let loads = store
        .namespace_loads(&Scope::All, 1_000)
        .await
        .expect("loads");
    let summary = loads
        .iter()
        .map(|l| {
            (
                l.namespace.to_string(),
                l.pending,
                l.blocked,
                l.failed_recently,
                l.backlog(),
            )
        })
        .collect::<Vec<_>>();
    assert_eq!(
        summary,
        [
            ("acme".to_owned(), 3, 0, 0, 3),
            ("globex".to_owned(), 0, 1, 1, 1)
        ]
    );
    let only_acme = store.namespace_loads(&acme, 1_000).await.expect("loads");
    assert_eq!(
        only_acme.len(),
        1,
        "a tenant's view holds only its own load"
    );
    assert_eq!(only_acme[0].namespace, ns("acme"));
}

/// Dashboard accounts: "log out everywhere" moves the session epoch on, and failed logins are
/// counted per key within the window and forgotten on request.
pub async fn accounts_track_sessions_and_failed_logins(accounts: Arc<dyn super::Accounts>) {
    let user = accounts
        .create_user(
            super::NewUser {
                email: "a@acme.test".into(),
                tenant: Some(ns("acme")),
                role: crate::model::Role::Admin,
                password_hash: "x".into(),
            },
            1,
        )
        .await
        .expect("user");
    assert_eq!(user.session_epoch, 0);
    assert_eq!(
        accounts.bump_session_epoch(user.id).await.expect("bump"),
        Some(1)
    );
    let reread = accounts
        .user_by_id(user.id)
        .await
        .expect("read")
        .expect("user");
    assert_eq!(reread.session_epoch, 1);
    assert_eq!(
        accounts.bump_session_epoch(9_999).await.expect("bump"),
        None
    );

    let email = "email:a@acme.test".to_owned();
    let ip = "ip:10.0.0.1".to_owned();
    for at in [100, 200, 300] {
        accounts
            .record_login_failure(&[email.clone(), ip.clone()], at)
            .await
            .expect("record");
    }
    accounts
        .record_login_failure(std::slice::from_ref(&ip), 400)
        .await
        .expect("record");
    let both = [email.clone(), ip.clone()];
    assert_eq!(accounts.login_failures(&both, 0).await.expect("count"), 4);
    assert_eq!(accounts.login_failures(&both, 250).await.expect("count"), 2);
    assert_eq!(
        accounts
            .login_failures(std::slice::from_ref(&email), 0)
            .await
            .expect("count"),
        3
    );
    accounts.clear_login_failures(&email).await.expect("clear");
    assert_eq!(
        accounts
            .login_failures(std::slice::from_ref(&email), 0)
            .await
            .expect("count"),
        0
    );
    assert_eq!(
        accounts
            .login_failures(std::slice::from_ref(&ip), 0)
            .await
            .expect("count"),
        4,
        "clearing one key leaves the others"
    );
}

/// Every driver scan (claims, the next wake-up, lost dispatches, the sweep) of a namespaced
/// engine sees only its namespace; the operator's sees all of them.
pub async fn driver_scans_stay_inside_their_namespace(store: Arc<dyn Store>) {
    let (acme, globex) = (Scope::Only(ns("acme")), Scope::Only(ns("globex")));
    for (id, namespace) in [("d-a", "acme"), ("d-g", "globex")] {
        let run = store
            .create_run(new_run(id, namespace), 1, Some(&lease("crashed")))
            .await
            .expect("create");
        let commit = TurnCommit {
            checkpoints: vec![pending_step(0)],
            ..TurnCommit::new(TurnOutcome::Suspend { wake_at: Some(500) })
        };
        store
            .commit_turn(
                &lease("crashed"),
                &run.id,
                attempt_of(&store, &run.id).await,
                commit,
                2,
            )
            .await
            .expect("commit")
            .expect("held");
    }
    assert_eq!(store.next_wake_at(&acme).await.expect("wake"), Some(500));
    let steps = store
        .pending_remote_steps(&globex, &LostDispatch::sent_before(100), 10)
        .await
        .expect("steps");
    assert_eq!(steps.len(), 1);
    assert_eq!(steps[0].checkpoint.run_id.as_str(), "d-g");
    let claimed = store
        .claim_runs(&acme, "acme-engine", 600, 50, 10, 5)
        .await
        .expect("claim");
    assert_eq!(
        claimed.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        ["d-a"],
        "an acme engine claims acme's due run only"
    );
    // acme's lease runs out with its engine gone; only a sweep in scope may bury it.
    let swept = store
        .sweep_abandoned(&globex, 0, 10_000)
        .await
        .expect("sweep");
    assert!(swept.iter().all(|r| r.namespace == ns("globex")));
    assert!(
        swept.iter().all(|r| r.id.as_str() != "d-a"),
        "a globex sweep never touches acme's runs"
    );
    let operator = store
        .claim_runs(&Scope::All, "operator", 600, 50, 10, 5)
        .await
        .expect("claim");
    assert_eq!(
        operator.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        ["d-g"],
        "the operator claims what is left, in any namespace"
    );
    let buried = store
        .sweep_abandoned(&acme, 0, 10_000)
        .await
        .expect("sweep");
    assert_eq!(
        buried
            .iter()
            .map(|r| (r.id.as_str(), r.status))
            .collect::<Vec<_>>(),
        [("d-a", RunStatus::Dead)],
        "the acme sweep buries acme's abandoned run, and not the operator's globex one"
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

/// Rows written before namespaces were stamped (NULL or `''`) read back as `default`, match the
/// `default` filter and no other. Planting them takes raw SQL, so each backend passes
/// `execute_raw`; the statement is the same on both.
pub async fn legacy_null_and_empty_namespaces_read_as_default<F, Fut>(
    store: Arc<dyn Store>,
    execute_raw: F,
) where
    F: Fn(String) -> Fut,
    Fut: std::future::Future<Output = crate::store::StoreResult<u64>>,
{
    for (id, ns) in [("l-null", "NULL"), ("l-empty", "''")] {
        execute_raw(format!(
            "INSERT INTO runs (id, namespace, workflow, workflow_version, status, input, root_run_id, created_at, updated_at) \
             VALUES ('{id}', {ns}, 'wf', 1, 'completed', '{{}}', '{id}', 1, 1)"
        ))
        .await
        .expect("plant legacy row");
    }
    let default = Scope::Only(Namespace::default_ns());
    let page = store
        .list_runs(&default, &RunQuery::default())
        .await
        .expect("list");
    assert_eq!(page.runs.len(), 2, "legacy rows match the default filter");
    assert!(
        page.runs.iter().all(|r| r.namespace.is_default()),
        "and read back as default"
    );
    assert!(
        store
            .get_run(&default, &RunId::parse("l-null").expect("id"))
            .await
            .expect("get")
            .is_some()
    );
    assert!(
        store
            .list_runs(&Scope::Only(ns("acme")), &RunQuery::default())
            .await
            .expect("list")
            .runs
            .is_empty()
    );
}

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
    let checkpoints = vec![local, pending_step(1)];
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
        redispatched: vec![0],
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

/// Stamps every conformance case as a `#[tokio::test]` for one backend. `$make` is an async
/// expression giving a fresh `Arc<dyn Store>`.
#[macro_export]
macro_rules! store_conformance {
    ($make:expr) => {
        $crate::store_conformance!(@list [always] $make);
    };
    // `$make` gives `Option<Arc<dyn Store>>`; `None` skips the case (the backend is absent here
    // and `make test` already said so loudly).
    (skippable $make:expr) => {
        $crate::store_conformance!(@list [skippable] $make);
    };
    (@list [$mode:ident] $make:expr) => {
        $crate::store_conformance!(@cases [$mode] $make;
            created_runs_read_back_and_ids_are_unique,
            scoped_reads_never_cross_namespaces,
            pages_follow_the_keyset_order,
            list_filters_apply,
            leases_are_exclusive_until_they_expire,
            step_results_apply_once,
            results_during_a_turn_wake_the_run,
            released_leases_are_claimable_at_once,
            exhausted_recoveries_bury_the_run,
            a_committed_turn_resets_the_recovery_count,
            a_turn_that_outlived_its_claim_cannot_commit,
            cancelling_a_continued_child_cancels_its_successor,
            starts_claim_their_run_inside_the_scope,
            a_start_commits_its_first_turn_with_the_insert,
            results_claim_the_runs_they_wake,
            a_due_timer_keeps_the_run_claimed,
            blocked_runs_unpark_when_their_version_is_served,
            blocked_runs_with_a_recheck_time_wake_when_it_passes,
            a_parked_run_keeps_results_of_steps_still_out,
            sticky_turns_commit_only_an_untouched_run,
            filters_and_facets_stay_inside_the_scope,
            driver_scans_stay_inside_their_namespace,
            racing_claims_split_the_runs,
            control_verbs_and_leases_follow_their_rules,
            families_and_loads_follow_the_scope,
            concurrent_writes_keep_their_own_outcomes,
            concurrent_sticky_turns_each_move_their_own_run,
            concurrent_starts_each_insert_their_own_run,
            step_events_checkpoint_only_open_runs_in_scope,
            step_beats_touch_only_their_own_pending_step,
            lost_dispatches_spare_live_senders,
            a_derived_history_is_the_stored_one
        );
    };
    (@cases [always] $make:expr; $($case:ident),*) => {
        $(
            #[tokio::test]
            async fn $case() {
                $crate::store::conformance::$case($make.await).await;
            }
        )*
    };
    (@cases [skippable] $make:expr; $($case:ident),*) => {
        $(
            #[tokio::test]
            async fn $case() {
                if let Some(store) = $make.await {
                    $crate::store::conformance::$case(store).await;
                }
            }
        )*
    };
}
