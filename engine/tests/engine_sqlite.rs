//! The engine end to end on the embedded default: SQLite store, in-process transport, embedded
//! step worker.

mod common;

use common::{elsewhere, wait_for, wait_until};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use durable::EngineError;
use durable::StartRun;
use durable::model::{
    Checkpoint, CheckpointKind, CheckpointStatus, Namespace, Run, RunStatus, Scope, TenantEvent,
    TenantEventKind,
};
use durable::prelude::*;
use durable::runtime::{SystemClock, Worker, WorkerConfig};
use durable::store::{SqliteStore, Store};
use durable::transport::{EventDelivery, MemoryTransport, Partitions, Subscription, Transport};
use futures::StreamExt;
use serde_json::{Value, json};

struct Harness {
    engine: Engine,
    worker: Option<Worker>,
    store: Arc<dyn Store>,
}

async fn store_at(path: &std::path::Path) -> Arc<dyn Store> {
    Arc::new(
        SqliteStore::connect(&format!("sqlite://{}", path.display()))
            .await
            .expect("connect"),
    )
}

async fn start(store: Arc<dyn Store>, registry: Registry) -> Harness {
    let transport: Arc<dyn Transport> = Arc::new(MemoryTransport::new());
    let registry = Arc::new(registry);
    let engine = Engine::new(
        store.clone(),
        transport.clone(),
        registry.clone(),
        EngineConfig::default(),
    );
    engine.start().await.expect("engine starts");
    let worker = start_worker(registry, transport).await;
    Harness {
        engine,
        worker: Some(worker),
        store,
    }
}

/// An embedded step worker serving every partition of `transport`.
async fn start_worker(registry: Arc<Registry>, transport: Arc<dyn Transport>) -> Worker {
    Worker::start(
        registry,
        transport,
        Arc::new(SystemClock),
        WorkerConfig {
            partitions: Partitions::All,
            concurrency: 8,
        },
    )
    .await
    .expect("worker starts")
}

impl Harness {
    /// Starts `workflow` with `input` in the default namespace.
    async fn start_run(&self, workflow: &str, input: Value) -> Run {
        self.engine
            .start_run(StartRun {
                workflow: workflow.into(),
                input,
                ..Default::default()
            })
            .await
            .expect("start")
    }

    /// The tenant events of namespace `ns`, from now on.
    async fn events(&self, ns: Namespace) -> Subscription<EventDelivery> {
        self.engine
            .transport()
            .subscribe_events(Scope::Only(ns))
            .await
            .expect("subscribe")
    }

    async fn stop(mut self) {
        if let Some(w) = self.worker.take() {
            w.shutdown().await;
        }
        self.engine.shutdown().await;
    }
}

fn order_registry(executions: Arc<AtomicU32>) -> Registry {
    let mut r = Registry::new();
    let ex = executions.clone();
    r.step("add", move |_ctx: StepContext, (a, b): (i64, i64)| {
        let ex = ex.clone();
        async move {
            ex.fetch_add(1, Ordering::SeqCst);
            Ok::<_, StepError>(a + b)
        }
    });
    r.workflow("sum3", 1, |ctx: WorkflowContext, n: i64| async move {
        let a: i64 = ctx.step("add", &(n, 1)).await?;
        let b: i64 = ctx.step("add", &(a, 1)).await?;
        let c: i64 = ctx.step("add", &(b, 1)).await?;
        Ok::<_, WorkflowError>(json!({ "total": c }))
    });
    r
}

#[tokio::test]
async fn a_three_step_workflow_completes_with_checkpoints() {
    let dir = tempfile::tempdir().expect("tmp");
    let executions = Arc::new(AtomicU32::new(0));
    let h = start(
        store_at(&dir.path().join("db")).await,
        order_registry(executions.clone()),
    )
    .await;
    let mut events = h.events(Namespace::tenant("acme").unwrap()).await;
    let run = h
        .engine
        .start_run(StartRun {
            workflow: "sum3".into(),
            input: json!(10),
            namespace: Some(Namespace::tenant("acme").unwrap()),
            ..Default::default()
        })
        .await
        .expect("start");
    let done = wait_for(&h.store, &run.id, RunStatus::Completed).await;
    assert_eq!(done.output, Some(json!({"total": 13})));
    assert_eq!(done.namespace.as_str(), "acme");
    let cps = h.store.checkpoints(&Scope::All, &run.id).await.unwrap();
    assert_eq!(cps.len(), 3);
    assert!(
        cps.iter().all(
            |c| c.kind == CheckpointKind::RemoteStep && c.status == CheckpointStatus::Completed
        )
    );
    assert_eq!(
        cps[0].worker_group.as_deref(),
        Some("add@acme"),
        "steps route to the run's partition"
    );
    assert_eq!(executions.load(Ordering::SeqCst), 3, "each step ran once");
    // The run's tenant saw its lifecycle, ending with completion.
    let announced = heard(&mut events).await;
    assert!(
        announced.iter().all(|ev| ev.run_id == run.id),
        "{announced:?}"
    );
    let kinds = kinds(&announced);
    assert_eq!(kinds.first(), Some(&TenantEventKind::RunStarted));
    assert_eq!(kinds.last(), Some(&TenantEventKind::RunCompleted));
    // Each change once: the start is announced as its first turn (persisted with it) left the
    // run, suspended, and each result's turn moves it on from `suspended` in one write, never
    // `running` in the store.
    let count = |kind| kinds.iter().filter(|k| **k == kind).count();
    assert_eq!(count(TenantEventKind::StepCompleted), 3, "{kinds:?}");
    assert_eq!(count(TenantEventKind::RunSuspended), 0, "{kinds:?}");
    assert_eq!(count(TenantEventKind::RunRunning), 0, "{kinds:?}");
    assert_eq!(kinds.len(), 5, "{kinds:?}");
    h.stop().await;
}

/// A turn's new step leaves while the turn's commit is still in flight, and its result, which
/// then arrives before the step is on record, is kept and applied once the commit lands: the
/// second step runs while the test holds SQLite's write lock, and the run still completes with
/// each step run once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_leaves_before_its_turn_commits_and_its_early_result_is_kept() {
    early_dispatch_case(Peer::None, Path::Straight).await;
}

/// A step that races a timer waits for the commit that records it. Were the commit refused (the
/// timer came due meanwhile, say), the next turn could take the timer's branch and put another
/// step at the same position, and the early step's result, which names only its run and
/// position, would be applied to that other step.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_racing_a_timer_waits_for_its_commit() {
    early_dispatch_case(Peer::None, Path::RacingATimer).await;
}

/// A step that follows a race with a timer still pending waits for its commit too: the timer
/// could come due before the commit lands and the next turn take its branch instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_after_a_race_with_a_pending_timer_waits_for_its_commit() {
    early_dispatch_case(Peer::None, Path::AfterARaceWithATimer).await;
}

/// With another control plane on the same store, a step waits for the commit that records it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_peer_on_the_store_a_step_waits_for_its_commit() {
    early_dispatch_case(Peer::First, Path::Straight).await;
}

/// A control plane that started alone notices a peer that joins within its next heartbeat
/// (about a second, not a third of a lease), and its steps then wait for their commits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn once_a_peer_joins_a_step_waits_for_its_commit() {
    early_dispatch_case(Peer::Joins, Path::Straight).await;
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

/// An engine with nothing registered on the SQLite file at `db`, started.
async fn start_peer(db: &std::path::Path) -> Engine {
    let peer = Engine::new(
        store_at(db).await,
        Arc::new(MemoryTransport::new()),
        Arc::new(Registry::new()),
        EngineConfig::default(),
    );
    peer.start().await.expect("the peer starts");
    peer
}

/// Runs a two-step workflow, holding SQLite's write lock from the first step's end for 300 ms:
/// the second step runs meanwhile only if steps leave before their commit, which they must
/// unless a `peer` engine shares the file or the second step's `path` races a timer.
async fn early_dispatch_case(peer: Peer, path: Path) {
    let dir = tempfile::tempdir().expect("tmp");
    let db = dir.path().join("db");
    let mut peers = Vec::new();
    if peer == Peer::First {
        peers.push(start_peer(&db).await);
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
    let h = start(store_at(&db).await, r).await;
    if peer == Peer::Joins {
        peers.push(start_peer(&db).await);
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
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_that_beats_its_turns_commit_is_turned_ahead() {
    let dir = tempfile::tempdir().expect("tmp");
    let db = dir.path().join("db");
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
    let h = start(store_at(&db).await, r).await;
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
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_runs_first_step_leaves_while_its_insert_commits() {
    start_under_lock(None).await;
}

/// A run started with a caller's id (which a run may have already, and then the start is
/// refused and must have sent nothing) sends its first step only once the insert committed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_with_a_chosen_id_sends_its_first_step_after_its_insert() {
    start_under_lock(Some(RunId::parse("chosen-1").expect("id"))).await;
}

/// Starts a two-step run with `id` while the test holds SQLite's write lock, and checks which
/// steps ran before the lock was released: both, unless the id was chosen.
async fn start_under_lock(id: Option<RunId>) {
    let dir = tempfile::tempdir().expect("tmp");
    let db = dir.path().join("db");
    let ran = Arc::new([AtomicU32::new(0), AtomicU32::new(0)]);
    let mut r = Registry::new();
    counted_steps(&mut r, &ran, &[(0, "first"), (1, "second")]);
    r.workflow("two-local", 1, |ctx: WorkflowContext, n: i64| async move {
        let a: i64 = ctx.step("first", &n).await?;
        let b: i64 = ctx.step("second", &a).await?;
        Ok::<_, WorkflowError>(b)
    });
    let h = start(store_at(&db).await, r).await;
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

/// A result can reach a control plane before the commit that records its step (another control
/// plane sent the step early and its commit is in flight): it is tried again until the step is
/// on record, and applied then.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_that_beats_another_control_planes_commit_is_applied_when_it_lands() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut r = Registry::new();
    r.workflow("one", 1, |ctx: WorkflowContext, n: i64| async move {
        let a: i64 = ctx.step("remote", &n).await?;
        Ok::<_, WorkflowError>(a)
    });
    let h = start(store_at(&dir.path().join("db")).await, r).await;
    let id = elsewhere::creates(&h.store, "acme", "one", 4).await;
    let claim = elsewhere::claim();

    h.engine
        .transport()
        .publish_result(elsewhere::completed(&id, 0, 5), None)
        .await
        .expect("publish");
    tokio::time::sleep(Duration::from_millis(50)).await;
    h.store
        .commit_turn(
            &claim,
            &id,
            durable::store::conformance::attempt_of(&h.store, &id).await,
            elsewhere::sends_step(0, 4),
            3,
        )
        .await
        .expect("commit")
        .expect("still leased");

    let done = wait_for(&h.store, &id, RunStatus::Completed).await;
    assert_eq!(done.output, Some(json!(5)), "the early result was applied");
    h.stop().await;
}

/// The same with the run suspended on an earlier step: its row and history are read, the step
/// is not on record yet, and the result is tried again (nothing written meanwhile) until the
/// other control plane's commit lands; it then takes the sticky path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_that_beats_the_commit_of_a_suspended_runs_turn_elsewhere_is_applied_after_it() {
    let dir = tempfile::tempdir().expect("tmp");
    let h = start(
        store_at(&dir.path().join("db")).await,
        elsewhere::two_steps(),
    )
    .await;
    let mut events = h.events(Namespace::tenant("acme").unwrap()).await;
    let id = elsewhere::creates(&h.store, "acme", "two", 1).await;
    let claim = elsewhere::claim();
    let suspended = h
        .store
        .commit_turn(
            &claim,
            &id,
            durable::store::conformance::attempt_of(&h.store, &id).await,
            elsewhere::sends_step(0, 1),
            2,
        )
        .await
        .expect("commit")
        .expect("still leased")
        .run;

    // Step 1 left before the turn that records it committed, and its result came here first.
    h.engine
        .transport()
        .publish_result(elsewhere::completed(&id, 1, 50), None)
        .await
        .expect("publish");
    tokio::time::sleep(Duration::from_millis(50)).await;
    let step_0 = elsewhere::completed(&id, 0, 5);
    h.store
        .apply_result_and_commit(
            &step_0,
            &claim,
            suspended.attempt,
            elsewhere::sends_step(1, 5),
            3,
        )
        .await
        .expect("commit")
        .expect("the run was untouched: the early result wrote nothing");

    let done = wait_for(&h.store, &id, RunStatus::Completed).await;
    assert_eq!(done.output, Some(json!(50)), "the early result was applied");
    assert_eq!(
        kinds(&heard(&mut events).await),
        [
            TenantEventKind::StepCompleted,
            TenantEventKind::RunCompleted
        ],
        "applied with the last turn, in one write"
    );
    h.stop().await;
}

/// A result for a run that another control plane moved on since this one parked it is not
/// applied to the stale cached history: with a peer on the store, the run is read again, and the
/// result still takes the sticky path (recorded with the run's next turn in one write, the run
/// never `running`) rather than a write to record it and another for the turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_for_a_run_a_peer_moved_on_takes_the_sticky_path_from_the_store() {
    let dir = tempfile::tempdir().expect("tmp");
    let db = dir.path().join("db");
    let peer = start_peer(&db).await;
    let h = start(store_at(&db).await, elsewhere::two_steps()).await;
    let acme = Namespace::tenant("acme").unwrap();
    let mut events = h.events(acme.clone()).await;
    let run = h
        .engine
        .start_run(StartRun {
            workflow: "two".into(),
            input: json!(1),
            namespace: Some(acme),
            ..Default::default()
        })
        .await
        .expect("start");
    assert_eq!(run.status, RunStatus::Suspended, "parked here, on step 0");

    // Another control plane takes step 0's result and moves the run on to step 1.
    let step_0 = elsewhere::completed(&run.id, 0, 5);
    let to_step_1 = elsewhere::sends_step(1, 5);
    h.store
        .apply_result_and_commit(&step_0, &elsewhere::claim(), run.attempt, to_step_1, 2)
        .await
        .expect("commit")
        .expect("the run was as this control plane left it");

    h.engine
        .transport()
        .publish_result(elsewhere::completed(&run.id, 1, 50), None)
        .await
        .expect("publish");
    let done = wait_for(&h.store, &run.id, RunStatus::Completed).await;
    assert_eq!(done.output, Some(json!(50)));
    assert_eq!(
        kinds(&heard(&mut events).await),
        [
            TenantEventKind::RunStarted,
            TenantEventKind::StepCompleted,
            TenantEventKind::RunCompleted
        ],
        "step 1's result and the last turn were one write"
    );
    h.stop().await;
    peer.shutdown().await;
}

/// A control plane that drives one namespace never turns another's run, even on the sticky path
/// from the store: a `globex` result that reaches an `acme` control plane is recorded (the store
/// wakes the run for its own control plane) but its run is not read, claimed or completed here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_control_plane_never_turns_another_tenants_run_from_its_result() {
    let dir = tempfile::tempdir().expect("tmp");
    let store = store_at(&dir.path().join("db")).await;
    let acme_only = Engine::new(
        store.clone(),
        Arc::new(MemoryTransport::new()),
        Arc::new(elsewhere::two_steps()),
        EngineConfig {
            namespace: Some(Namespace::tenant("acme").unwrap()),
            ..EngineConfig::default()
        },
    );
    acme_only.start().await.expect("engine starts");
    let id = elsewhere::creates(&store, "globex", "two", 1).await;
    store
        .commit_turn(
            &elsewhere::claim(),
            &id,
            durable::store::conformance::attempt_of(&store, &id).await,
            elsewhere::sends_step(0, 1),
            2,
        )
        .await
        .expect("commit")
        .expect("still leased");

    acme_only
        .transport()
        .publish_result(elsewhere::completed(&id, 0, 5), None)
        .await
        .expect("publish");
    let recorded = async {
        loop {
            let cps = store.checkpoints(&Scope::All, &id).await.expect("read");
            if cps[0].status == CheckpointStatus::Completed {
                return cps;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    let cps = tokio::time::timeout(Duration::from_secs(10), recorded)
        .await
        .expect("the result is recorded");
    assert_eq!(cps.len(), 1, "no turn of globex's run ran here");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let run = store
        .get_run(&Scope::All, &id)
        .await
        .expect("read")
        .expect("exists");
    assert_eq!(run.status, RunStatus::Suspended, "{run:?}");
    assert_eq!(run.locked_by, None, "never claimed by acme's control plane");
    assert_eq!(
        store
            .checkpoints(&Scope::All, &id)
            .await
            .expect("read")
            .len(),
        1,
        "still no turn"
    );
    acme_only.shutdown().await;
}

/// The tenant events `events` delivers until it is quiet for 200 ms.
async fn heard(events: &mut Subscription<EventDelivery>) -> Vec<TenantEvent> {
    let mut heard = Vec::new();
    while let Ok(Some(EventDelivery::Event(ev))) =
        tokio::time::timeout(Duration::from_millis(200), events.next()).await
    {
        heard.push(ev);
    }
    heard
}

/// What `events` announced, in order.
fn kinds(events: &[TenantEvent]) -> Vec<TenantEventKind> {
    events.iter().map(|ev| ev.kind).collect()
}
/// A start persists its run's first turn with the insert when that turn runs no local step; a
/// start refused for a reused id sends and runs nothing, whether its first turn would have sent a
/// remote step or run a local one.
#[tokio::test]
async fn a_refused_start_runs_nothing() {
    let dir = tempfile::tempdir().expect("tmp");
    let executions = Arc::new(AtomicU32::new(0));
    let mut r = order_registry(executions.clone());
    let locals = Arc::new(AtomicU32::new(0));
    let seen = locals.clone();
    r.workflow("local-first", 1, move |ctx: WorkflowContext, _: Value| {
        let seen = seen.clone();
        async move {
            let n: u32 = ctx
                .local_step("count", || async move {
                    Ok(seen.fetch_add(1, Ordering::SeqCst) + 1)
                })
                .await?;
            Ok::<_, WorkflowError>(n)
        }
    });
    let h = start(store_at(&dir.path().join("db")).await, r).await;
    let start_as = |workflow: &str, input: Value| StartRun {
        workflow: workflow.into(),
        input,
        id: Some(RunId::parse(&format!("fixed-{workflow}")).expect("id")),
        ..Default::default()
    };
    let sum = h
        .engine
        .start_run(start_as("sum3", json!(1)))
        .await
        .expect("start");
    assert_eq!(
        sum.status,
        RunStatus::Suspended,
        "the first turn was persisted with the start"
    );
    let first = h.store.checkpoints(&Scope::All, &sum.id).await.unwrap();
    assert_eq!(first[0].kind, CheckpointKind::RemoteStep);
    wait_for(&h.store, &sum.id, RunStatus::Completed).await;
    let local = h
        .engine
        .start_run(start_as("local-first", json!(null)))
        .await
        .expect("start");
    let local = wait_for(&h.store, &local.id, RunStatus::Completed).await;
    assert_eq!(local.output, Some(json!(1)));

    for (workflow, input) in [("sum3", json!(1)), ("local-first", json!(null))] {
        let again = h.engine.start_run(start_as(workflow, input)).await;
        assert!(
            matches!(&again, Err(EngineError::RunExists(id)) if id.as_str() == format!("fixed-{workflow}")),
            "a reused id is refused: {again:?}"
        );
    }
    // Whatever a refused start had sent would have run by now on the in-process worker.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(executions.load(Ordering::SeqCst), 3, "no step ran again");
    assert_eq!(locals.load(Ordering::SeqCst), 1, "no local step ran again");
    h.stop().await;
}

#[tokio::test]
async fn a_restart_does_not_repeat_completed_steps() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("db");
    let executions = Arc::new(AtomicU32::new(0));
    // First life: the worker only serves nothing, so the run stops after dispatching step 0.
    let store = store_at(&path).await;
    let mut r = order_registry(executions.clone());
    let h = start(store.clone(), std::mem::take(&mut r)).await;
    let run = h.start_run("sum3", json!(1)).await;
    let done = wait_for(&store, &run.id, RunStatus::Completed).await;
    assert_eq!(done.output, Some(json!({"total": 4})));
    h.stop().await;
    assert_eq!(executions.load(Ordering::SeqCst), 3);
    // Second life over the same file: replaying the finished history executes nothing.
    let h = start(store_at(&path).await, order_registry(executions.clone())).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        executions.load(Ordering::SeqCst),
        3,
        "no completed step runs again"
    );
    h.stop().await;
}

#[tokio::test]
async fn steps_dispatched_before_a_crash_are_redispatched_on_restart() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("db");
    let executions = Arc::new(AtomicU32::new(0));
    // First life has no worker at all: step 0 is persisted and dispatched into the void.
    let store = store_at(&path).await;
    let transport: Arc<dyn Transport> = Arc::new(MemoryTransport::new());
    let engine = Engine::new(
        store.clone(),
        transport,
        Arc::new(order_registry(executions.clone())),
        EngineConfig::default(),
    );
    engine.start().await.unwrap();
    let run = engine
        .start_run(StartRun {
            workflow: "sum3".into(),
            input: json!(5),
            ..Default::default()
        })
        .await
        .unwrap();
    wait_for(&store, &run.id, RunStatus::Suspended).await;
    engine.shutdown().await;
    assert_eq!(executions.load(Ordering::SeqCst), 0);
    // Second life: the in-process queue is gone, so the engine sends the step again.
    let h = start(store_at(&path).await, order_registry(executions.clone())).await;
    let done = wait_for(&h.store, &run.id, RunStatus::Completed).await;
    assert_eq!(done.output, Some(json!({"total": 8})));
    assert_eq!(executions.load(Ordering::SeqCst), 3);
    h.stop().await;
}

#[tokio::test]
async fn a_second_process_on_the_same_database_leaves_a_live_peers_steps_alone() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("db");
    let executions = Arc::new(AtomicU32::new(0));
    let short_lease = || EngineConfig {
        lease: Duration::from_secs(1),
        ..EngineConfig::default()
    };
    // Process A has no worker: step 0 waits in A's in-process queue.
    let a = Engine::new(
        store_at(&path).await,
        Arc::new(MemoryTransport::new()),
        Arc::new(order_registry(executions.clone())),
        short_lease(),
    );
    a.start().await.expect("a starts");
    let run = a
        .start_run(StartRun {
            workflow: "sum3".into(),
            input: json!(7),
            ..Default::default()
        })
        .await
        .expect("start");
    let store = store_at(&path).await;
    wait_for(&store, &run.id, RunStatus::Suspended).await;
    // Process B starts on the same file with a worker of its own. A is alive and still holds
    // the task, so B must not send it again: that would run the step twice.
    let transport: Arc<dyn Transport> = Arc::new(MemoryTransport::new());
    let registry = Arc::new(order_registry(executions.clone()));
    let b = Engine::new(
        store.clone(),
        transport.clone(),
        registry.clone(),
        short_lease(),
    );
    b.start().await.expect("b starts");
    let worker = start_worker(registry, transport).await;
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(
        executions.load(Ordering::SeqCst),
        0,
        "a live peer's step was sent again"
    );
    // A stops: its queue is gone with it, so B sends the step again and finishes the run.
    a.shutdown().await;
    let done = wait_for(&store, &run.id, RunStatus::Completed).await;
    assert_eq!(done.output, Some(json!({"total": 10})));
    assert_eq!(executions.load(Ordering::SeqCst), 3, "each step ran once");
    worker.shutdown().await;
    b.shutdown().await;
}

#[tokio::test]
async fn local_steps_failures_and_unknown_versions() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut r = Registry::new();
    r.workflow("local", 1, |ctx: WorkflowContext, _: Value| async move {
        let v: u32 = ctx.local_step("compute", || async { Ok(41) }).await?;
        Ok::<_, WorkflowError>(v + 1)
    });
    r.workflow(
        "fails",
        1,
        |_ctx: WorkflowContext, input: Value| async move {
            if input["ok"] == json!(true) {
                Ok(json!("fine"))
            } else {
                Err(WorkflowError::msg("input.ok is not true"))
            }
        },
    );
    r.workflow("bad-input", 1, |_ctx: WorkflowContext, n: u32| async move {
        Ok::<_, WorkflowError>(n)
    });
    let h = start(store_at(&dir.path().join("db")).await, r).await;
    let local = h.start_run("local", json!(null)).await;
    let done = wait_for(&h.store, &local.id, RunStatus::Completed).await;
    assert_eq!(done.output, Some(json!(42)));
    let cps = h.store.checkpoints(&Scope::All, &local.id).await.unwrap();
    assert_eq!(cps.len(), 1);
    assert_eq!(cps[0].kind, CheckpointKind::LocalStep);
    let failed = h.start_run("fails", json!({})).await;
    let failed = wait_for(&h.store, &failed.id, RunStatus::Failed).await;
    assert_eq!(failed.error.unwrap().message, "input.ok is not true");
    let bad = h.start_run("bad-input", json!("x")).await;
    let bad = wait_for(&h.store, &bad.id, RunStatus::Failed).await;
    assert_eq!(bad.error.unwrap().code.as_deref(), Some("invalid_input"));
    let unknown = h
        .engine
        .start_run(StartRun {
            workflow: "nope".into(),
            input: json!(1),
            ..Default::default()
        })
        .await;
    assert!(
        unknown.is_err(),
        "starting an unregistered workflow is refused"
    );
    h.stop().await;
}

#[tokio::test]
async fn a_timer_that_comes_due_while_the_process_is_down_fires_once_on_restart() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("db");
    let registry = || {
        let mut r = Registry::new();
        r.workflow("nap", 1, |ctx: WorkflowContext, ms: u64| async move {
            let before = ctx.now().await;
            ctx.sleep(Duration::from_millis(ms)).await;
            let after = ctx.now().await;
            let token: String = ctx.side_effect(uuid_like).await?;
            Ok::<_, WorkflowError>(json!({ "before": before, "after": after, "token": token }))
        });
        r
    };
    let h = start(store_at(&path).await, registry()).await;
    let run = h.start_run("nap", json!(300)).await;
    let suspended = wait_for(&h.store, &run.id, RunStatus::Suspended).await;
    let due = suspended.wake_at.expect("a sleeping run has a wake time");
    h.stop().await;
    // The process is down while the timer comes due.
    tokio::time::sleep(Duration::from_millis(400)).await;
    let h = start(store_at(&path).await, registry()).await;
    let done = wait_for(&h.store, &run.id, RunStatus::Completed).await;
    let out = done.output.unwrap();
    let cps = h.store.checkpoints(&Scope::All, &run.id).await.unwrap();
    let kinds: Vec<_> = cps
        .iter()
        .map(|c| (c.kind, c.name.as_str(), c.status))
        .collect();
    assert_eq!(
        kinds,
        vec![
            (
                CheckpointKind::SideEffect,
                "now#0",
                CheckpointStatus::Completed
            ),
            (
                CheckpointKind::Sleep,
                "sleep:1",
                CheckpointStatus::Completed
            ),
            (
                CheckpointKind::SideEffect,
                "now#2",
                CheckpointStatus::Completed
            ),
            (
                CheckpointKind::SideEffect,
                "sideEffect",
                CheckpointStatus::Completed
            ),
        ]
    );
    // Values captured before the restart replay unchanged.
    assert_eq!(out["before"], cps[0].output.clone().unwrap());
    assert_eq!(out["token"], cps[3].output.clone().unwrap());
    assert_eq!(cps[1].wake_at, Some(due));
    assert!(
        out["after"].as_i64().unwrap() >= due,
        "the run resumed after its timer: {out}"
    );
    h.stop().await;
}

fn uuid_like() -> String {
    uuid::Uuid::new_v4().to_string()
}

fn signal_registry() -> Registry {
    let mut r = Registry::new();
    // Sleeps first, so a signal sent right after the start arrives before the wait.
    r.workflow(
        "approve-late",
        1,
        |ctx: WorkflowContext, _: Value| async move {
            ctx.sleep(Duration::from_millis(150)).await;
            let first: Option<Value> = ctx.wait_signal("approve", None).await?;
            let second: Option<Value> = ctx.wait_signal("approve", None).await?;
            Ok::<_, WorkflowError>(json!([first, second]))
        },
    );
    r.workflow(
        "impatient",
        1,
        |ctx: WorkflowContext, _: Value| async move {
            let got: Option<Value> = ctx
                .wait_signal("never", Some(Duration::from_millis(100)))
                .await?;
            Ok::<_, WorkflowError>(json!({ "timed_out": got.is_none() }))
        },
    );
    r
}

#[tokio::test]
async fn signals_sent_before_the_wait_are_buffered_and_taken_in_order() {
    use durable::store::SignalSent;
    let dir = tempfile::tempdir().expect("tmp");
    let h = start(store_at(&dir.path().join("db")).await, signal_registry()).await;
    let acme = Namespace::tenant("acme").unwrap();
    let run = h
        .engine
        .start_run(StartRun {
            workflow: "approve-late".into(),
            input: json!({}),
            namespace: Some(acme.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    // Both signals arrive while the run is still asleep, before it waits.
    for n in [1, 2] {
        let sent = h
            .engine
            .signal(
                &Scope::Only(acme.clone()),
                &run.id,
                "approve",
                json!({ "n": n }),
            )
            .await
            .unwrap();
        assert!(matches!(sent, SignalSent::Delivered(_)), "{sent:?}");
    }
    // Another tenant cannot signal it: the run is invisible to it.
    let other = h
        .engine
        .signal(
            &Scope::Only(Namespace::tenant("globex").unwrap()),
            &run.id,
            "approve",
            json!(0),
        )
        .await
        .unwrap();
    assert!(matches!(other, SignalSent::NotFound));
    let done = wait_for(&h.store, &run.id, RunStatus::Completed).await;
    assert_eq!(done.output, Some(json!([{ "n": 1 }, { "n": 2 }])));
    // A signal to a finished run is refused, not buffered.
    let late = h
        .engine
        .signal(&Scope::All, &run.id, "approve", json!(3))
        .await
        .unwrap();
    assert!(matches!(late, SignalSent::RunFinished(_)));
    assert!(h.store.buffered_signals(&run.id).await.unwrap().is_empty());
    h.stop().await;
}

#[tokio::test]
async fn a_signal_wait_times_out_durably() {
    let dir = tempfile::tempdir().expect("tmp");
    let h = start(store_at(&dir.path().join("db")).await, signal_registry()).await;
    let run = h.start_run("impatient", json!({})).await;
    let done = wait_for(&h.store, &run.id, RunStatus::Completed).await;
    assert_eq!(done.output, Some(json!({ "timed_out": true })));
    let cps = h.store.checkpoints(&Scope::All, &run.id).await.unwrap();
    assert_eq!(cps.len(), 1);
    assert_eq!(cps[0].kind, CheckpointKind::Signal);
    assert_eq!(cps[0].status, CheckpointStatus::Failed);
    assert_eq!(
        cps[0].error.as_ref().and_then(|e| e.code.as_deref()),
        Some("timeout")
    );
    h.stop().await;
}

#[tokio::test]
async fn children_fan_out_in_the_parents_namespace_and_their_failures_reach_the_parent() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut r = order_registry(Arc::new(AtomicU32::new(0)));
    r.workflow("fan", 1, |ctx: WorkflowContext, n: i64| async move {
        let kids = (0..n).map(|i| {
            let ctx = ctx.clone();
            async move { ctx.child::<_, Value>("sum3", &i).await }
        });
        let outputs = futures::future::join_all(kids).await;
        let mut total = 0;
        for out in outputs {
            total += out?["total"].as_i64().unwrap_or_default();
        }
        // A failing child surfaces as an error the parent can handle.
        let failed = ctx.child::<_, Value>("sum3", &"not a number").await;
        Ok::<_, WorkflowError>(json!({ "total": total, "child_failed": failed.is_err() }))
    });
    let h = start(store_at(&dir.path().join("db")).await, r).await;
    let acme = Namespace::tenant("acme").unwrap();
    let run = h
        .engine
        .start_run(StartRun {
            workflow: "fan".into(),
            input: json!(3),
            namespace: Some(acme.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    let done = wait_for(&h.store, &run.id, RunStatus::Completed).await;
    // Children 0, 1, 2 return i + 3.
    assert_eq!(
        done.output,
        Some(json!({ "total": 3 + 4 + 5, "child_failed": true }))
    );
    let page = h
        .store
        .list_runs(&Scope::All, &durable::model::RunQuery::default())
        .await
        .unwrap();
    let children: Vec<_> = page
        .runs
        .iter()
        .filter(|r| r.parent_run_id.as_ref() == Some(&run.id))
        .collect();
    assert_eq!(children.len(), 4);
    for child in &children {
        assert_eq!(
            child.namespace, acme,
            "a child is stamped with its parent's namespace"
        );
        assert_eq!(child.root_run_id, run.id);
        assert_eq!(child.nesting_depth, 1);
        assert!(child.id.as_str().starts_with(&format!("{}.child.", run.id)));
    }
    assert_eq!(
        children
            .iter()
            .filter(|c| c.status == RunStatus::Failed)
            .count(),
        1
    );
    let cps = h.store.checkpoints(&Scope::All, &run.id).await.unwrap();
    assert!(cps.iter().all(|c| c.kind == CheckpointKind::Child));
    h.stop().await;
}

#[tokio::test]
async fn cancel_retry_and_retry_with_input_follow_the_rules() {
    use durable::Control;
    use std::sync::atomic::AtomicBool;
    let dir = tempfile::tempdir().expect("tmp");
    let healthy = Arc::new(AtomicBool::new(false));
    let mut r = signal_registry();
    let h2 = healthy.clone();
    r.step("shaky", move |_ctx: StepContext, _: Value| {
        let ok = h2.load(Ordering::SeqCst);
        async move {
            if ok {
                Ok(json!("fine"))
            } else {
                Err(StepError::fatal("not yet"))
            }
        }
    });
    r.workflow(
        "uses-shaky",
        1,
        |ctx: WorkflowContext, input: Value| async move {
            let first: Value = ctx.local_step("before", || async { Ok(json!(1)) }).await?;
            let out: Value = ctx.step("shaky", &input).await?;
            Ok::<_, WorkflowError>(json!([first, out]))
        },
    );
    let h = start(store_at(&dir.path().join("db")).await, r).await;
    let acme = Namespace::tenant("acme").unwrap();
    let globex = Scope::Only(Namespace::tenant("globex").unwrap());

    // Cancel: a waiting run is cancelled; another tenant cannot; a finished run stays finished.
    let waiting = h
        .engine
        .start_run(StartRun {
            workflow: "approve-late".into(),
            input: json!({}),
            namespace: Some(acme.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    wait_for(&h.store, &waiting.id, RunStatus::Suspended).await;
    assert!(matches!(
        h.engine.cancel(&globex, &waiting.id).await.unwrap(),
        Control::NotFound
    ));
    let cancelled = h
        .engine
        .cancel(&Scope::Only(acme.clone()), &waiting.id)
        .await
        .unwrap();
    assert!(
        matches!(&cancelled, Control::Done(run) if run.status == RunStatus::Cancelled),
        "{cancelled:?}"
    );
    assert!(matches!(
        h.engine.cancel(&Scope::All, &waiting.id).await.unwrap(),
        Control::WrongStatus(_)
    ));
    tokio::time::sleep(Duration::from_millis(250)).await;
    assert_eq!(
        h.store
            .get_run(&Scope::All, &waiting.id)
            .await
            .unwrap()
            .unwrap()
            .status,
        RunStatus::Cancelled,
        "a stale turn never resurrects it"
    );

    // Retry: a failed run is re-driven from its last good checkpoint.
    let run = h
        .engine
        .start_run(StartRun {
            workflow: "uses-shaky".into(),
            input: json!({}),
            namespace: Some(acme.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    wait_for(&h.store, &run.id, RunStatus::Failed).await;
    let before = h.store.checkpoints(&Scope::All, &run.id).await.unwrap();
    assert!(matches!(
        h.engine.retry(&globex, &run.id).await.unwrap(),
        Control::NotFound
    ));
    healthy.store(true, Ordering::SeqCst);
    assert!(matches!(
        h.engine
            .retry(&Scope::Only(acme.clone()), &run.id)
            .await
            .unwrap(),
        Control::Done(_)
    ));
    let done = wait_for(&h.store, &run.id, RunStatus::Completed).await;
    assert_eq!(done.output, Some(json!([1, "fine"])));
    let after = h.store.checkpoints(&Scope::All, &run.id).await.unwrap();
    assert_eq!(
        after[0], before[0],
        "the good checkpoint was kept, not re-run"
    );
    assert!(
        matches!(
            h.engine.retry(&Scope::All, &run.id).await.unwrap(),
            Control::WrongStatus(_)
        ),
        "a completed run is not retried"
    );

    // Retry with input, by an operator: the new run keeps the original's namespace and links back.
    let Control::Done(new) = h
        .engine
        .retry_with_input(&Scope::All, &run.id, json!({"edited": true}))
        .await
        .unwrap()
    else {
        panic!("retry with input is done");
    };
    assert_eq!(new.namespace, acme);
    assert_eq!(new.retry_of.as_ref(), Some(&run.id));
    assert_eq!(new.input, json!({"edited": true}));
    wait_for(&h.store, &new.id, RunStatus::Completed).await;
    assert_eq!(
        h.store
            .get_run(&Scope::All, &run.id)
            .await
            .unwrap()
            .unwrap(),
        done,
        "the original is untouched"
    );
    assert!(matches!(
        h.engine
            .retry_with_input(&globex, &run.id, json!({}))
            .await
            .unwrap(),
        Control::NotFound
    ));
    h.stop().await;
}

#[tokio::test]
async fn failed_steps_are_retried_with_backoff_until_their_policy_gives_up() {
    use durable::model::RetryPolicy;
    let dir = tempfile::tempdir().expect("tmp");
    let tries = Arc::new(AtomicU32::new(0));
    let mut r = Registry::new();
    let t = tries.clone();
    // Fails its first two tries (retryably), then succeeds.
    r.step("flappy", move |ctx: StepContext, _: Value| {
        let n = t.fetch_add(1, Ordering::SeqCst) + 1;
        async move {
            assert_eq!(ctx.attempt, n, "each try carries its attempt number");
            if n < 3 {
                Err(StepError::retryable(format!("try {n} failed")))
            } else {
                Ok(json!(n))
            }
        }
    });
    r.step("always-down", |_ctx: StepContext, _: Value| async move {
        Err::<Value, _>(StepError::retryable("down"))
    });
    let quick = RetryPolicy {
        max_attempts: 3,
        initial_ms: 30,
        factor: 2.0,
        max_ms: 1000,
        jitter: 0.2,
    };
    let q = quick.clone();
    r.workflow("flappy-wf", 1, move |ctx: WorkflowContext, _: Value| {
        let q = q.clone();
        async move { Ok::<_, WorkflowError>(ctx.step_with::<_, Value>("flappy", &json!({}), q).await?) }
    });
    r.workflow("down-wf", 1, move |ctx: WorkflowContext, _: Value| {
        let q = quick.clone();
        async move {
            Ok::<_, WorkflowError>(
                ctx.step_with::<_, Value>("always-down", &json!({}), q)
                    .await?,
            )
        }
    });
    let h = start(store_at(&dir.path().join("db")).await, r).await;
    let ok = h.start_run("flappy-wf", json!({})).await;
    let done = wait_for(&h.store, &ok.id, RunStatus::Completed).await;
    assert_eq!(done.output, Some(json!(3)));
    let cp = &h.store.checkpoints(&Scope::All, &ok.id).await.unwrap()[0];
    assert_eq!((cp.status, cp.attempts), (CheckpointStatus::Completed, 3));
    assert_eq!(tries.load(Ordering::SeqCst), 3);

    let down = h.start_run("down-wf", json!({})).await;
    let failed = wait_for(&h.store, &down.id, RunStatus::Failed).await;
    assert_eq!(failed.error.unwrap().message, "down");
    let cp = &h.store.checkpoints(&Scope::All, &down.id).await.unwrap()[0];
    assert_eq!(
        (cp.status, cp.attempts),
        (CheckpointStatus::Failed, 3),
        "three tries, then the failure is final"
    );
    h.stop().await;
}

#[tokio::test]
async fn continue_as_new_chains_successors_in_the_same_namespace_and_settles_a_waiting_parent() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut r = Registry::new();
    r.workflow("countdown", 1, |ctx: WorkflowContext, n: u32| async move {
        let seen: u32 = ctx.local_step("tick", || async move { Ok(n) }).await?;
        if seen > 0 {
            return Err(ctx.continue_as_new(&(seen - 1)));
        }
        Ok(json!("liftoff"))
    });
    r.workflow("launcher", 1, |ctx: WorkflowContext, _: Value| async move {
        let out: Value = ctx.child("countdown", &2).await?;
        Ok::<_, WorkflowError>(json!({ "child": out }))
    });
    let h = start(store_at(&dir.path().join("db")).await, r).await;
    let acme = Namespace::tenant("acme").unwrap();
    let first = h
        .engine
        .start_run(StartRun {
            workflow: "countdown".into(),
            input: json!(2),
            namespace: Some(acme.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    let last_id = durable::model::RunId::parse(&format!("{}:c2", first.id)).unwrap();
    for _ in 0..500 {
        if h.store
            .get_run(&Scope::All, &last_id)
            .await
            .unwrap()
            .is_some()
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let last = wait_for(&h.store, &last_id, RunStatus::Completed).await;
    assert_eq!(last.output, Some(json!("liftoff")));
    assert_eq!(last.namespace, acme);
    assert_eq!(last.root_run_id, first.id, "lineage is kept");
    let middle = h
        .store
        .get_run(&Scope::All, &last.continued_from.clone().unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(middle.status, RunStatus::Continued);
    assert_eq!(middle.continued_from.as_ref(), Some(&first.id));
    assert_eq!(
        h.store
            .checkpoints(&Scope::All, &last.id)
            .await
            .unwrap()
            .len(),
        1,
        "each successor starts with a clean history"
    );

    let parent = h.start_run("launcher", json!({})).await;
    let done = wait_for(&h.store, &parent.id, RunStatus::Completed).await;
    assert_eq!(
        done.output,
        Some(json!({ "child": "liftoff" })),
        "the end of the child's chain settles the parent"
    );
    h.stop().await;
}

#[tokio::test]
async fn a_child_failing_under_fail_fast_cancels_its_siblings() {
    use durable::runtime::Gather;
    let dir = tempfile::tempdir().expect("tmp");
    let mut r = signal_registry();
    r.workflow("kid", 1, |ctx: WorkflowContext, kind: String| async move {
        match kind.as_str() {
            "boom" => Err(WorkflowError::msg("boom")),
            "slow" => {
                ctx.sleep(Duration::from_secs(3600)).await;
                Ok(json!("slept"))
            }
            _ => Ok(ctx
                .wait_signal::<Value>("never", None)
                .await?
                .unwrap_or_default()),
        }
    });
    r.workflow(
        "brood",
        1,
        |ctx: WorkflowContext, mode: String| async move {
            let kids = [("kid", "slow"), ("kid", "boom"), ("kid", "waits")];
            let mode = if mode == "fail_fast" {
                Gather::FailFast
            } else {
                Gather::WaitAll
            };
            let out: Vec<Value> = ctx.gather_children(&kids, mode).await?;
            Ok::<_, WorkflowError>(json!(out))
        },
    );
    let h = start(store_at(&dir.path().join("db")).await, r).await;
    let acme = Namespace::tenant("acme").unwrap();
    let run = h
        .engine
        .start_run(StartRun {
            workflow: "brood".into(),
            input: json!("fail_fast"),
            namespace: Some(acme),
            ..Default::default()
        })
        .await
        .unwrap();
    let failed = wait_for(&h.store, &run.id, RunStatus::Failed).await;
    assert_eq!(failed.error.unwrap().message, "boom");
    let kid = |seq: u32| durable::runtime::child_run_id(&run.id, seq);
    for seq in [0, 2] {
        let sibling = wait_for(&h.store, &kid(seq), RunStatus::Cancelled).await;
        assert_eq!(
            sibling.error.unwrap().code.as_deref(),
            Some("cancelled"),
            "sibling {seq}"
        );
    }
    assert_eq!(
        h.store
            .get_run(&Scope::All, &kid(1))
            .await
            .unwrap()
            .unwrap()
            .status,
        RunStatus::Failed
    );
    h.stop().await;
}

#[tokio::test]
async fn a_step_try_that_outlives_its_timeout_is_retried_then_fails_for_good() {
    use durable::model::RetryPolicy;
    let dir = tempfile::tempdir().expect("tmp");
    let tries = Arc::new(AtomicU32::new(0));
    let mut r = Registry::new();
    let t = tries.clone();
    // The first try hangs past the timeout; the second answers at once.
    r.step("sluggish", move |_ctx: StepContext, _: Value| {
        let n = t.fetch_add(1, Ordering::SeqCst) + 1;
        async move {
            if n == 1 {
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            Ok::<_, StepError>(json!(n))
        }
    });
    r.step("hangs", |_ctx: StepContext, _: Value| async move {
        tokio::time::sleep(Duration::from_secs(2)).await;
        Ok::<_, StepError>(json!("too late"))
    });
    let options = StepOptions::default()
        .retry(RetryPolicy {
            max_attempts: 2,
            initial_ms: 10,
            factor: 1.0,
            max_ms: 10,
            jitter: 0.0,
        })
        .timeout(Duration::from_millis(150));
    let o = options.clone();
    r.workflow("sluggish-wf", 1, move |ctx: WorkflowContext, _: Value| {
        let o = o.clone();
        async move {
            Ok::<_, WorkflowError>(ctx.step_with::<_, Value>("sluggish", &json!({}), o).await?)
        }
    });
    r.workflow("hangs-wf", 1, move |ctx: WorkflowContext, _: Value| {
        let o = options.clone();
        async move { Ok::<_, WorkflowError>(ctx.step_with::<_, Value>("hangs", &json!({}), o).await?) }
    });
    let h = start(store_at(&dir.path().join("db")).await, r).await;
    let start_wf = |name: &str| StartRun {
        workflow: name.into(),
        input: json!({}),
        ..Default::default()
    };
    let ok = h.engine.start_run(start_wf("sluggish-wf")).await.unwrap();
    let hung = h.engine.start_run(start_wf("hangs-wf")).await.unwrap();
    let done = wait_for(&h.store, &ok.id, RunStatus::Completed).await;
    assert_eq!(done.output, Some(json!(2)), "the second try's answer wins");
    let cp = &h.store.checkpoints(&Scope::All, &ok.id).await.unwrap()[0];
    assert_eq!((cp.status, cp.attempts), (CheckpointStatus::Completed, 2));
    assert_eq!(
        cp.timeout_ms,
        Some(150),
        "the timeout is stored with the step"
    );

    let failed = wait_for(&h.store, &hung.id, RunStatus::Failed).await;
    assert_eq!(failed.error.unwrap().code.as_deref(), Some("timeout"));
    let cp = &h.store.checkpoints(&Scope::All, &hung.id).await.unwrap()[0];
    assert_eq!(
        (cp.status, cp.attempts),
        (CheckpointStatus::Failed, 2),
        "each try timed out, then the failure is final"
    );
    h.stop().await;
}

#[tokio::test]
async fn cancelling_a_run_tells_its_in_flight_steps_on_the_control_channel() {
    let dir = tempfile::tempdir().expect("tmp");
    let started = Arc::new(tokio::sync::Notify::new());
    let (told_tx, told_rx) = tokio::sync::oneshot::channel::<bool>();
    let told_tx = Arc::new(std::sync::Mutex::new(Some(told_tx)));
    let mut r = Registry::new();
    let s = started.clone();
    r.step("long", move |ctx: StepContext, _: Value| {
        let (s, told) = (s.clone(), told_tx.clone());
        async move {
            s.notify_one();
            let heard = tokio::time::timeout(Duration::from_secs(10), ctx.cancelled())
                .await
                .is_ok();
            if let Some(tx) = told.lock().unwrap().take() {
                let _ = tx.send(heard && ctx.is_cancelled());
            }
            Ok::<_, StepError>(json!("stopped early"))
        }
    });
    r.workflow("long-wf", 1, |ctx: WorkflowContext, _: Value| async move {
        Ok::<_, WorkflowError>(ctx.step::<_, Value>("long", &json!({})).await?)
    });
    let h = start(store_at(&dir.path().join("db")).await, r).await;
    let run = h.start_run("long-wf", json!({})).await;
    tokio::time::timeout(Duration::from_secs(5), started.notified())
        .await
        .expect("the step starts");
    h.engine.cancel(&Scope::All, &run.id).await.unwrap();
    let heard = tokio::time::timeout(Duration::from_secs(5), told_rx)
        .await
        .expect("the handler hears of the cancel")
        .expect("answer");
    assert!(heard, "the step saw its run cancelled");
    let cancelled = wait_for(&h.store, &run.id, RunStatus::Cancelled).await;
    assert_eq!(cancelled.output, None, "the late result is dropped");
    h.stop().await;
}

#[tokio::test]
async fn runs_stay_on_their_version_and_unpark_when_a_process_serves_it() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("db");
    let v1 = |r: &mut Registry| {
        r.workflow("greet", 1, |ctx: WorkflowContext, _: Value| async move {
            ctx.sleep(Duration::from_millis(200)).await;
            Ok::<_, WorkflowError>(json!("v1"))
        });
    };
    let v2 = |r: &mut Registry| {
        r.workflow("greet", 2, |_ctx: WorkflowContext, _: Value| async move {
            Ok::<_, WorkflowError>(json!("v2"))
        });
    };
    // A v1 process starts a run, which suspends on its timer; the process goes away.
    let mut old = Registry::new();
    v1(&mut old);
    let h = start(store_at(&path).await, old).await;
    let pinned = h.start_run("greet", json!({})).await;
    assert_eq!(pinned.workflow_version, 1);
    wait_for(&h.store, &pinned.id, RunStatus::Suspended).await;
    h.stop().await;

    // Only v2 is deployed: new runs start on v2, the v1 run parks as blocked with the reason.
    let mut new = Registry::new();
    v2(&mut new);
    let h = start(store_at(&path).await, new).await;
    let fresh = h.start_run("greet", json!({})).await;
    assert_eq!(fresh.workflow_version, 2);
    let fresh = wait_for(&h.store, &fresh.id, RunStatus::Completed).await;
    assert_eq!(fresh.output, Some(json!("v2")));
    let blocked = wait_for(&h.store, &pinned.id, RunStatus::Blocked).await;
    let reason = blocked.error.expect("a reason");
    assert_eq!(reason.code.as_deref(), Some("no_worker"));
    assert!(reason.message.contains("version 1"), "{}", reason.message);
    h.stop().await;

    // A process serving both versions un-parks it, and it finishes on v1.
    let mut both = Registry::new();
    v1(&mut both);
    v2(&mut both);
    let h = start(store_at(&path).await, both).await;
    let done = wait_for(&h.store, &pinned.id, RunStatus::Completed).await;
    assert_eq!(done.output, Some(json!("v1")));
    assert_eq!(done.workflow_version, 1);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_steps_dispatch_together_and_their_racing_results_are_each_applied_once() {
    let dir = tempfile::tempdir().expect("tmp");
    let executions = Arc::new(AtomicU32::new(0));
    let mut r = Registry::new();
    let ex = executions.clone();
    r.step("square", move |_ctx: StepContext, n: u64| {
        let ex = ex.clone();
        async move {
            ex.fetch_add(1, Ordering::SeqCst);
            // Results land in a different order than the steps were issued.
            tokio::time::sleep(Duration::from_millis((7 * n) % 5)).await;
            Ok::<_, StepError>(n * n)
        }
    });
    r.workflow("squares", 1, |ctx: WorkflowContext, n: u64| async move {
        let first = (1..=n).map(|i| {
            let ctx = ctx.clone();
            async move { ctx.step::<_, u64>("square", &i).await }
        });
        let squares = futures::future::try_join_all(first).await?;
        // A second fan-out after the join, so results also race a suspended run.
        let second = squares.iter().map(|s| {
            let ctx = ctx.clone();
            let s = *s;
            async move { ctx.step::<_, u64>("square", &(s % 7)).await }
        });
        let again = futures::future::try_join_all(second).await?;
        Ok::<_, WorkflowError>(json!({ "sum": squares.iter().sum::<u64>(), "again": again.len() }))
    });
    let h = start(store_at(&dir.path().join("db")).await, r).await;
    let mut ids = Vec::new();
    for _ in 0..40 {
        let run = h.start_run("squares", json!(5)).await;
        ids.push(run.id);
    }
    for id in &ids {
        let done = wait_for(&h.store, id, RunStatus::Completed).await;
        assert_eq!(done.output, Some(json!({ "sum": 55, "again": 5 })));
        let cps = h.store.checkpoints(&Scope::All, id).await.unwrap();
        assert_eq!(cps.len(), 10);
        assert!(
            cps.iter()
                .all(|c| c.status == CheckpointStatus::Completed && c.attempts == 1)
        );
        let first_wave: Vec<_> = cps[..5].iter().map(|c| c.enqueued_at).collect();
        assert!(
            first_wave.iter().all(|at| *at == first_wave[0]),
            "the five parallel steps are dispatched by one turn: {first_wave:?}"
        );
    }
    assert_eq!(
        executions.load(Ordering::SeqCst),
        40 * 10,
        "every step ran exactly once"
    );
    h.stop().await;
}

#[tokio::test]
async fn a_child_of_a_parent_recovered_by_an_operator_keeps_the_parents_namespace() {
    use durable::model::RunId;
    use durable::runtime::Clock;
    use durable::store::{Claim, NewRun};
    let dir = tempfile::tempdir().expect("tmp");
    let store = store_at(&dir.path().join("db")).await;
    // A tenant engine claimed the parent and died: its lease runs out in 100 ms.
    let now = SystemClock.now();
    let acme = Namespace::tenant("acme").unwrap();
    let parent = store
        .create_run(
            NewRun::top_level(
                RunId::parse("parent-1").unwrap(),
                acme.clone(),
                "parent",
                1,
                json!(null),
            ),
            now,
            Some(&Claim {
                scope: Scope::Only(acme.clone()),
                owner: "crashed-acme-engine".into(),
                until: now + 100,
            }),
        )
        .await
        .unwrap();
    assert_eq!(parent.status, RunStatus::Running);
    let mut r = Registry::new();
    r.workflow("parent", 1, |ctx: WorkflowContext, _: Value| async move {
        let kid: String = ctx.child("kid", &json!(null)).await?;
        Ok::<_, WorkflowError>(json!({ "kid_ran_in": kid }))
    });
    r.workflow("kid", 1, |ctx: WorkflowContext, _: Value| async move {
        Ok::<_, WorkflowError>(ctx.namespace().to_string())
    });
    // An operator engine (no namespace) recovers it.
    let h = start(store.clone(), r).await;
    let done = wait_for(&h.store, &parent.id, RunStatus::Completed).await;
    assert_eq!(done.namespace, acme);
    assert_eq!(done.output, Some(json!({ "kid_ran_in": "acme" })));
    let kid = h
        .store
        .get_run(
            &Scope::Only(acme.clone()),
            &durable::runtime::child_run_id(&parent.id, 0),
        )
        .await
        .unwrap()
        .expect("the child is visible to acme");
    assert_eq!(kid.namespace, acme, "not the operator's default");
    assert_eq!(kid.parent_run_id.as_ref(), Some(&parent.id));
    assert_eq!(kid.root_run_id, parent.id);
    h.stop().await;
}

#[tokio::test]
async fn redispatch_resends_waiting_steps_and_continue_retries_a_blocked_run() {
    use durable::Control;
    use durable::runtime::Clock;

    let dir = tempfile::tempdir().expect("tmp");
    let store = store_at(&dir.path().join("db")).await;
    let executions = Arc::new(AtomicU32::new(0));
    let transport: Arc<dyn Transport> = Arc::new(MemoryTransport::new());
    let registry = Arc::new(order_registry(executions.clone()));
    let engine = Engine::new(
        store.clone(),
        transport.clone(),
        registry.clone(),
        EngineConfig::default(),
    );
    engine.start().await.expect("engine starts");
    let acme = Namespace::parse("acme").expect("ns");
    let run = engine
        .start_run(StartRun {
            workflow: "sum3".into(),
            input: json!(5),
            namespace: Some(acme.clone()),
            ..Default::default()
        })
        .await
        .expect("start");
    wait_for(&store, &run.id, RunStatus::Suspended).await;
    assert!(
        transport
            .worker_groups(&Scope::All)
            .await
            .expect("groups")
            .is_empty(),
        "no worker is connected yet"
    );

    // Another tenant cannot redispatch it; its own scope can, and the step goes out again.
    let globex = Scope::Only(Namespace::parse("globex").expect("ns"));
    let (outcome, _) = engine
        .redispatch(&globex, &run.id)
        .await
        .expect("redispatch");
    assert!(matches!(outcome, Control::NotFound));
    let (outcome, steps) = engine
        .redispatch(&Scope::Only(acme.clone()), &run.id)
        .await
        .expect("redispatch");
    assert!(matches!(outcome, Control::Done(_)));
    assert_eq!(steps, 1);

    // A worker arrives: the queued copy of step 0 was replaced by the redispatch, so it runs
    // each step once.
    let worker = Worker::start(
        registry,
        transport.clone(),
        Arc::new(SystemClock),
        WorkerConfig {
            partitions: Partitions::All,
            concurrency: 8,
        },
    )
    .await
    .expect("worker starts");
    let groups = transport
        .worker_groups(&Scope::Only(acme.clone()))
        .await
        .expect("groups");
    assert_eq!(
        groups
            .iter()
            .map(|g| (g.token(), g.workers))
            .collect::<Vec<_>>(),
        [("add@*".to_owned(), 1)]
    );
    assert!(groups[0].serves("add", &acme));
    let done = wait_for(&store, &run.id, RunStatus::Completed).await;
    assert_eq!(done.output, Some(json!({"total": 8})));
    assert_eq!(executions.load(Ordering::SeqCst), 3);
    let (outcome, steps) = engine
        .redispatch(&Scope::All, &run.id)
        .await
        .expect("redispatch");
    assert!(
        matches!(outcome, Control::WrongStatus(_)) && steps == 0,
        "a finished run has nothing to redispatch"
    );

    // A run on a version nobody serves parks as blocked; continue drives it again, and it
    // parks again with the reason because the cause remains.
    let mut pinned = durable::store::NewRun::top_level(
        durable::model::RunId::generate(),
        acme.clone(),
        "sum3",
        9,
        json!(1),
    );
    pinned.tags = vec!["pinned".into()];
    let pinned = store
        .create_run(pinned, SystemClock.now(), None)
        .await
        .expect("create");
    let blocked = wait_for(&store, &pinned.id, RunStatus::Blocked).await;
    let before = blocked.updated_at;
    assert!(matches!(
        engine
            .continue_run(&globex, &pinned.id)
            .await
            .expect("continue"),
        Control::NotFound
    ));
    assert!(matches!(
        engine
            .continue_run(&Scope::Only(acme.clone()), &pinned.id)
            .await
            .expect("continue"),
        Control::Done(ref r) if r.status == RunStatus::Pending
    ));
    let reblocked = wait_for(&store, &pinned.id, RunStatus::Blocked).await;
    assert!(reblocked.updated_at >= before);
    assert!(matches!(
        engine
            .continue_run(&Scope::All, &run.id)
            .await
            .expect("continue"),
        Control::WrongStatus(_)
    ));
    worker.shutdown().await;
    engine.shutdown().await;
}

/// The dispatch guard (wire §6.4): a step requiring a capability that no live worker on its
/// token advertises is not queued; the run parks `blocked` with the wire's reason, keeping the
/// local step it already ran and sending the fan-out's other step, whose result it keeps while
/// parked. Once a worker advertising the capability is live, the recheck sends the held step and
/// the run completes, no step run twice.
#[tokio::test]
async fn a_step_no_live_worker_can_take_parks_the_run_until_one_can() {
    let dir = tempfile::tempdir().expect("tmp");
    let counters = [(); 3].map(|()| Arc::new(AtomicU32::new(0)));
    let [prepared, geocoded, forecast] = counters.clone();
    let registry = |extra: Option<&str>| {
        let mut r = Registry::new();
        let geocoded = geocoded.clone();
        r.step("geocode", move |_ctx: StepContext, city: String| {
            let geocoded = geocoded.clone();
            async move {
                geocoded.fetch_add(1, Ordering::SeqCst);
                Ok::<_, StepError>(format!("{city}: 52.52N"))
            }
        });
        let forecast = forecast.clone();
        r.step("forecast", move |_ctx: StepContext, city: String| {
            let forecast = forecast.clone();
            async move {
                forecast.fetch_add(1, Ordering::SeqCst);
                Ok::<_, StepError>(format!("{city}: sunny"))
            }
        });
        let prepared = prepared.clone();
        r.workflow("locate", 1, move |ctx: WorkflowContext, city: String| {
            let prepared = prepared.clone();
            async move {
                let city: String = ctx
                    .local_step("prepare", || async move {
                        prepared.fetch_add(1, Ordering::SeqCst);
                        Ok(city.to_uppercase())
                    })
                    .await?;
                let options = StepOptions::default().requires(["geo-v2"]);
                let (at, sky): (String, String) = futures::future::try_join(
                    ctx.step_with("geocode", &city, options),
                    ctx.step("forecast", &city),
                )
                .await?;
                Ok::<_, WorkflowError>(format!("{at}; {sky}"))
            }
        });
        if let Some(capability) = extra {
            r.advertise(capability);
        }
        r
    };
    let mut h = start(store_at(&dir.path().join("db")).await, registry(None)).await;
    let acme = Namespace::tenant("acme").expect("tenant");
    let mut events = h.events(acme.clone()).await;
    let run = h
        .engine
        .start_run(StartRun {
            workflow: "locate".into(),
            input: json!("berlin"),
            namespace: Some(acme.clone()),
            ..Default::default()
        })
        .await
        .expect("start");
    let parked = wait_for(&h.store, &run.id, RunStatus::Blocked).await;
    let error = parked.error.expect("a parked run says why");
    assert_eq!(
        error.message,
        "blocked: no compatible worker (requires geo-v2)"
    );
    assert_eq!(error.code.as_deref(), Some("capability.unavailable"));
    let details = error.details.expect("details name the fix");
    assert_eq!(details["token"], json!("geocode@acme"));
    assert_eq!(details["missingCapabilities"], json!(["geo-v2"]));
    assert!(parked.wake_at.is_some(), "it looks again later");
    // The step that could go went, and its result is kept while the run is parked.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let cps = h
            .store
            .checkpoints(&Scope::All, &run.id)
            .await
            .expect("cps");
        let seen: Vec<_> = cps
            .iter()
            .map(|c| (c.kind, c.name.as_str(), c.status))
            .collect();
        if seen
            == [
                (
                    CheckpointKind::LocalStep,
                    "prepare",
                    CheckpointStatus::Completed,
                ),
                (
                    CheckpointKind::RemoteStep,
                    "forecast",
                    CheckpointStatus::Completed,
                ),
            ]
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the held step is never queued, the other one's result is kept: {seen:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(geocoded.load(Ordering::SeqCst), 0);

    // Rechecks that park it again for the same reason are not news on the tenant's stream.
    wait_until(&h.store, &run.id, Duration::from_secs(20), |now| {
        now.status == RunStatus::Blocked && now.updated_at > parked.updated_at
    })
    .await;
    let lifecycle: Vec<_> = kinds(&heard(&mut events).await)
        .into_iter()
        .filter(|kind| {
            matches!(
                kind,
                TenantEventKind::RunRunning | TenantEventKind::RunBlocked
            )
        })
        .collect();
    assert_eq!(
        lifecycle,
        [TenantEventKind::RunRunning, TenantEventKind::RunBlocked],
        "one turn, one parking; the recheck said nothing"
    );

    // A worker that can take it replaces the one that cannot.
    if let Some(w) = h.worker.take() {
        w.shutdown().await;
    }
    h.worker = Some(
        start_worker(
            Arc::new(registry(Some("geo-v2"))),
            h.engine.transport().clone(),
        )
        .await,
    );
    let done = wait_until(&h.store, &run.id, Duration::from_secs(30), |now| {
        now.status == RunStatus::Completed
    })
    .await;
    assert_eq!(done.output, Some(json!("BERLIN: 52.52N; BERLIN: sunny")));
    assert_eq!(done.error, None);
    let ran = counters.map(|c| c.load(Ordering::SeqCst));
    assert_eq!(
        ran,
        [1, 1, 1],
        "prepare, geocode and forecast each ran once"
    );
    h.stop().await;
}
