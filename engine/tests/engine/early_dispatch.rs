//! Steps that leave before the commit that records them, and results turned ahead of it.
//!
//! Embedded only: each case holds SQLite's write lock (a second connection in `BEGIN
//! IMMEDIATE`) to keep the engine's commits in flight while it watches what runs meanwhile;
//! PostgreSQL has no one lock that stops every write.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use durable::StartRun;
use durable::model::{Checkpoint, CheckpointKind, CheckpointStatus, Run, RunId, RunStatus, Scope};
use durable::prelude::*;
use durable::store::Store;
use serde_json::json;

use crate::backend::Backend;
use crate::common::wait_for;

engine_cases! {
    ;
    embedded_only:
    [multi_thread] a_step_leaves_before_its_turn_commits_and_its_early_result_is_kept,
    [multi_thread] a_step_racing_a_timer_waits_for_its_commit,
    [multi_thread] a_step_after_a_race_with_a_pending_timer_waits_for_its_commit,
    [multi_thread] with_a_peer_on_the_store_a_step_waits_for_its_commit,
    [multi_thread] once_a_peer_joins_a_step_waits_for_its_commit,
    [multi_thread] a_result_that_beats_its_turns_commit_is_turned_ahead,
    [multi_thread] a_new_runs_first_step_leaves_while_its_insert_commits,
    [multi_thread] a_run_with_a_chosen_id_sends_its_first_step_after_its_insert,
}

/// A turn's new step leaves while the turn's commit is still in flight, and its result, which
/// then arrives before the step is on record, is kept and applied once the commit lands: the
/// second step runs while the test holds SQLite's write lock, and the run still completes with
/// each step run once.
async fn a_step_leaves_before_its_turn_commits_and_its_early_result_is_kept(backend: Backend) {
    early_dispatch_case(backend, Peer::None, Path::Straight).await;
}

/// A step that races a timer waits for the commit that records it. Were the commit refused (the
/// timer came due meanwhile, say), the next turn could take the timer's branch and put another
/// step at the same position, and the early step's result, which names only its run and
/// position, would be applied to that other step.
async fn a_step_racing_a_timer_waits_for_its_commit(backend: Backend) {
    early_dispatch_case(backend, Peer::None, Path::RacingATimer).await;
}

/// A step that follows a race with a timer still pending waits for its commit too: the timer
/// could come due before the commit lands and the next turn take its branch instead.
async fn a_step_after_a_race_with_a_pending_timer_waits_for_its_commit(backend: Backend) {
    early_dispatch_case(backend, Peer::None, Path::AfterARaceWithATimer).await;
}

/// With another control plane on the same store, a step waits for the commit that records it.
async fn with_a_peer_on_the_store_a_step_waits_for_its_commit(backend: Backend) {
    early_dispatch_case(backend, Peer::First, Path::Straight).await;
}

/// A control plane that started alone notices a peer that joins within its next heartbeat
/// (about a second, not a third of a lease), and its steps then wait for their commits.
async fn once_a_peer_joins_a_step_waits_for_its_commit(backend: Backend) {
    early_dispatch_case(backend, Peer::Joins, Path::Straight).await;
}

/// What the second step of [`early_dispatch_case`]'s workflow does.
#[derive(Clone, Copy, PartialEq)]
enum Path {
    /// Nothing else: it is the turn's only new checkpoint.
    Straight,
    /// It races an hour's timer, created in the same turn.
    RacingATimer,
    /// The first step raced an hour's timer, which is still pending when the second is sent.
    AfterARaceWithATimer,
}

/// Whether another engine shares the store in [`early_dispatch_case`].
#[derive(Clone, Copy, PartialEq)]
enum Peer {
    None,
    /// Started before the engine under test.
    First,
    /// Started after it; the case then waits two seconds.
    Joins,
}

/// `step`'s output, or -1 if an hour's timer, created after it, ends first.
async fn against_an_hour(
    ctx: &WorkflowContext,
    step: impl std::future::Future<Output = Result<i64, StepError>>,
) -> Result<i64, StepError> {
    let timeout = ctx.sleep(Duration::from_secs(3600));
    match futures::future::select(Box::pin(step), timeout).await {
        futures::future::Either::Left((out, _)) => out,
        futures::future::Either::Right(_) => Ok(-1),
    }
}

/// Runs a two-step workflow, holding SQLite's write lock from the first step's end for 300 ms:
/// the second step runs meanwhile only if steps leave before their commit, which they must
/// unless a `peer` engine shares the file or the second step's `path` races a timer.
async fn early_dispatch_case(backend: Backend, peer: Peer, path: Path) {
    let db = backend.sqlite_file().expect("an embedded-only case");
    let mut peers = Vec::new();
    if peer == Peer::First {
        peers.push(backend.peer().await);
    }
    let ran = Arc::new([AtomicU32::new(0), AtomicU32::new(0)]);
    let mut r = Registry::new();
    let (first_running, release_first) = held_first_step(&mut r, &ran);
    let count = ran.clone();
    r.step("second", move |_ctx: StepContext, n: i64| {
        let count = count.clone();
        async move {
            count[1].fetch_add(1, Ordering::SeqCst);
            Ok::<_, StepError>(n * 10)
        }
    });
    r.workflow("early", 1, move |ctx: WorkflowContext, n: i64| async move {
        let first = ctx.step::<_, i64>("first", &n);
        let a = match path {
            Path::AfterARaceWithATimer => against_an_hour(&ctx, first).await?,
            Path::Straight | Path::RacingATimer => first.await?,
        };
        let second = ctx.step::<_, i64>("second", &a);
        let b = match path {
            Path::RacingATimer => against_an_hour(&ctx, second).await?,
            Path::Straight | Path::AfterARaceWithATimer => second.await?,
        };
        Ok::<_, WorkflowError>(b)
    });
    let h = backend.start(r).await;
    if peer == Peer::Joins {
        peers.push(backend.peer().await);
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    let run = h.start_run("early", json!(1)).await;
    let lock = lock_after_first_step(&db, &first_running, &release_first, &ran[1], 300).await;
    let on_record = h
        .store
        .checkpoints(&Scope::All, &run.id)
        .await
        .expect("checkpoints");
    let on_record: Vec<_> = on_record
        .iter()
        .filter(|c| c.kind == CheckpointKind::RemoteStep)
        .collect();
    assert_eq!(on_record.len(), 1, "only the first step is on record");
    assert_eq!(on_record[0].status, CheckpointStatus::Pending);
    if peer != Peer::None || path != Path::Straight {
        assert_eq!(
            ran[1].load(Ordering::SeqCst),
            0,
            "with a peer, or racing a timer, the second step waits for its turn's commit"
        );
    } else {
        assert_eq!(
            ran[1].load(Ordering::SeqCst),
            1,
            "the second step left while its turn's commit waited"
        );
    }
    let (done, cps) = unlock_and_complete(lock, &h.store, &run.id).await;
    assert_eq!(done.output, Some(json!(20)));
    let steps: Vec<_> = cps
        .iter()
        .filter(|c| c.kind == CheckpointKind::RemoteStep)
        .collect();
    assert_eq!(steps.len(), 2);
    assert!(
        steps
            .iter()
            .all(|c| c.status == CheckpointStatus::Completed)
    );
    assert_eq!(steps[1].output, Some(json!(20)));
    let ran = ran.each_ref().map(|c| c.load(Ordering::SeqCst));
    assert_eq!(ran, [1, 1], "each step ran once");
    h.stop().await;
    for peer in peers {
        peer.shutdown().await;
    }
}

/// Releases the write `lock` and waits for run `id` to complete: the run and its checkpoints.
async fn unlock_and_complete(
    lock: rusqlite::Connection,
    store: &Arc<dyn Store>,
    id: &RunId,
) -> (Run, Vec<Checkpoint>) {
    lock.execute_batch("ROLLBACK").expect("unlock");
    let done = wait_for(store, id, RunStatus::Completed).await;
    let cps = store
        .checkpoints(&Scope::All, id)
        .await
        .expect("checkpoints");
    (done, cps)
}

/// Registers step `first`, which counts its runs in `ran[0]`, tells the first returned `Notify`
/// that it runs, and waits for the second before it returns its input plus one.
fn held_first_step<const N: usize>(
    r: &mut Registry,
    ran: &Arc<[AtomicU32; N]>,
) -> (Arc<tokio::sync::Notify>, Arc<tokio::sync::Notify>) {
    let first_running = Arc::new(tokio::sync::Notify::new());
    let release_first = Arc::new(tokio::sync::Notify::new());
    let (running, release, count) = (first_running.clone(), release_first.clone(), ran.clone());
    r.step("first", move |_ctx: StepContext, n: i64| {
        let (running, release, count) = (running.clone(), release.clone(), count.clone());
        async move {
            count[0].fetch_add(1, Ordering::SeqCst);
            running.notify_one();
            release.notified().await;
            Ok::<_, StepError>(n + 1)
        }
    });
    (first_running, release_first)
}

/// Registers each `(i, name)` of `steps` as a step that counts its runs in `ran[i]` and returns
/// its input times ten.
fn counted_steps<const N: usize>(
    r: &mut Registry,
    ran: &Arc<[AtomicU32; N]>,
    steps: &[(usize, &'static str)],
) {
    for &(i, name) in steps {
        let count = ran.clone();
        r.step(name, move |_ctx: StepContext, n: i64| {
            let count = count.clone();
            async move {
                count[i].fetch_add(1, Ordering::SeqCst);
                Ok::<_, StepError>(n * 10)
            }
        });
    }
}

/// Waits for the first step to run, then takes SQLite's write lock on `db` (from then until the
/// returned connection rolls back, no write can commit), lets the step end, and waits up to
/// `within_ms` for the step counted by `last` to run.
async fn lock_after_first_step(
    db: &std::path::Path,
    first_running: &tokio::sync::Notify,
    release_first: &tokio::sync::Notify,
    last: &AtomicU32,
    within_ms: u64,
) -> rusqlite::Connection {
    tokio::time::timeout(Duration::from_secs(10), first_running.notified())
        .await
        .expect("the first step runs");
    let lock = rusqlite::Connection::open(db).expect("open");
    lock.execute_batch("BEGIN IMMEDIATE").expect("write lock");
    release_first.notify_one();
    let deadline = std::time::Instant::now() + Duration::from_millis(within_ms);
    while last.load(Ordering::SeqCst) == 0 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    lock
}

/// A result that arrives while the commit of the turn that sent its step is in flight is turned
/// at once, on the history that commit will leave: with SQLite's write lock held from the first
/// step's end, the second step leaves early, its result comes back before anything commits, and
/// the third step runs too. Once the lock is released, the commits land one after the other and
/// the run completes with each step run once.
async fn a_result_that_beats_its_turns_commit_is_turned_ahead(backend: Backend) {
    let db = backend.sqlite_file().expect("an embedded-only case");
    let ran = Arc::new([AtomicU32::new(0), AtomicU32::new(0), AtomicU32::new(0)]);
    let mut r = Registry::new();
    let (first_running, release_first) = held_first_step(&mut r, &ran);
    counted_steps(&mut r, &ran, &[(1, "second"), (2, "third")]);
    r.workflow("ahead", 1, |ctx: WorkflowContext, n: i64| async move {
        let a: i64 = ctx.step("first", &n).await?;
        let b: i64 = ctx.step("second", &a).await?;
        let c: i64 = ctx.step("third", &b).await?;
        Ok::<_, WorkflowError>(c)
    });
    let h = backend.start(r).await;
    let run = h.start_run("ahead", json!(1)).await;
    let lock = lock_after_first_step(&db, &first_running, &release_first, &ran[2], 2000).await;
    let on_record = h
        .store
        .checkpoints(&Scope::All, &run.id)
        .await
        .expect("checkpoints");
    assert_eq!(
        on_record
            .iter()
            .map(|c| (c.kind, c.status))
            .collect::<Vec<_>>(),
        vec![(CheckpointKind::RemoteStep, CheckpointStatus::Pending)],
        "nothing committed while the lock was held"
    );
    let ran_locked = ran.each_ref().map(|c| c.load(Ordering::SeqCst));
    assert_eq!(
        ran_locked,
        [1, 1, 1],
        "the second step's result was turned before its turn's commit, and the third step left"
    );
    let (done, cps) = unlock_and_complete(lock, &h.store, &run.id).await;
    assert_eq!(done.output, Some(json!(200)));
    assert_eq!(
        cps.iter()
            .map(|c| (c.kind, c.status, c.output.clone()))
            .collect::<Vec<_>>(),
        [2, 20, 200].map(|out| (
            CheckpointKind::RemoteStep,
            CheckpointStatus::Completed,
            Some(json!(out))
        )),
    );
    let ran = ran.each_ref().map(|c| c.load(Ordering::SeqCst));
    assert_eq!(ran, [1, 1, 1], "each step ran once");
    h.stop().await;
}

/// A run started with a generated id sends its first step while its insert commits (no run can
/// have that id, so the insert is not refused), and the step's result, back before the insert
/// landed, is turned ahead: both steps run while the test holds SQLite's write lock.
async fn a_new_runs_first_step_leaves_while_its_insert_commits(backend: Backend) {
    start_under_lock(backend, None).await;
}

/// A run started with a caller's id (which a run may have already, and then the start is
/// refused and must have sent nothing) sends its first step only once the insert committed.
async fn a_run_with_a_chosen_id_sends_its_first_step_after_its_insert(backend: Backend) {
    start_under_lock(backend, Some(RunId::parse("chosen-1").expect("id"))).await;
}

/// Starts a two-step run with `id` while the test holds SQLite's write lock, and checks which
/// steps ran before the lock was released: both, unless the id was chosen.
async fn start_under_lock(backend: Backend, id: Option<RunId>) {
    let db = backend.sqlite_file().expect("an embedded-only case");
    let ran = Arc::new([AtomicU32::new(0), AtomicU32::new(0)]);
    let mut r = Registry::new();
    counted_steps(&mut r, &ran, &[(0, "first"), (1, "second")]);
    r.workflow("two-local", 1, |ctx: WorkflowContext, n: i64| async move {
        let a: i64 = ctx.step("first", &n).await?;
        let b: i64 = ctx.step("second", &a).await?;
        Ok::<_, WorkflowError>(b)
    });
    let h = backend.start(r).await;
    let chosen = id.is_some();

    let lock = rusqlite::Connection::open(&db).expect("open");
    lock.execute_batch("BEGIN IMMEDIATE").expect("write lock");
    let engine = h.engine.clone();
    let starting = tokio::spawn(async move {
        engine
            .start_run(StartRun {
                workflow: "two-local".into(),
                input: json!(1),
                id,
                ..Default::default()
            })
            .await
    });
    let deadline =
        std::time::Instant::now() + Duration::from_millis(if chosen { 300 } else { 2000 });
    while ran[1].load(Ordering::SeqCst) == 0 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let ran_locked = ran.each_ref().map(|c| c.load(Ordering::SeqCst));
    if chosen {
        assert_eq!(
            ran_locked,
            [0, 0],
            "a chosen id's first step waits for the insert"
        );
    } else {
        assert_eq!(
            ran_locked,
            [1, 1],
            "the first step left during the insert, and its result was turned ahead"
        );
    }
    let none = h
        .store
        .list_runs(&Scope::All, &Default::default())
        .await
        .expect("list");
    assert!(
        none.runs.is_empty(),
        "nothing committed while the lock was held"
    );
    lock.execute_batch("ROLLBACK").expect("unlock");

    let run = starting.await.expect("joined").expect("started");
    let done = wait_for(&h.store, &run.id, RunStatus::Completed).await;
    assert_eq!(done.output, Some(json!(100)));
    let ran = ran.each_ref().map(|c| c.load(Ordering::SeqCst));
    assert_eq!(ran, [1, 1], "each step ran once");
    h.stop().await;
}
