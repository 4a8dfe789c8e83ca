//! The drive loop: claim runnable runs with a lease and execute one turn each.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, watch};

use super::guard::Outgoing;
use super::results::{Recorded, record_claiming};
use super::shared::Shared;
use crate::model::{
    CheckpointKind, CheckpointStatus, Millis, RemoteTask, Run, RunId, RunStatus, StepResult,
    TenantEventKind, parked_by_guard, step_id,
};
use crate::runtime::turn::{TurnInput, run_turn};
use crate::runtime::{Command, Decision, DecisionStatus, Registry, child_run_id};
use crate::store::{Committed, History, NewCheckpoint, NewRun, RunPatch, TurnCommit, TurnOutcome};
use crate::transport::naming::routing_token;

pub(crate) async fn drive_loop(shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    let lease_ms = shared.config.lease.as_millis() as i64;
    loop {
        if *stop.borrow() {
            break;
        }
        let free = shared.turns.available_permits() as u32;
        if free == 0 {
            // Every slot is busy: wait for one to come free rather than polling.
            tokio::select! {
                slot = shared.turns.clone().acquire_owned() => drop(slot),
                _ = stop.changed() => {}
            }
            continue;
        }
        let now = shared.clock.now();
        let claimed = match shared
            .store
            .claim_runs(
                &shared.scope,
                &shared.config.owner,
                now,
                lease_ms,
                free,
                shared.config.max_recoveries,
            )
            .await
        {
            Ok(runs) => runs,
            Err(e) => {
                tracing::warn!(error = %e, "claiming runs failed; retrying shortly");
                Vec::new()
            }
        };
        if claimed.is_empty() {
            // Any suspend committed from here on pokes us, until we know what we wait for.
            shared.plan_wake(Millis::MAX);
            let wait = idle_wait(&shared).await;
            shared.plan_wake(shared.clock.now() + wait.as_millis() as i64);
            tokio::select! {
                _ = shared.wake.notified() => {}
                _ = tokio::time::sleep(wait) => {}
                _ = stop.changed() => {}
            }
            // Awake: whatever was committed meanwhile is seen by the next claim.
            shared.plan_wake(Millis::MIN);
            continue;
        }
        for run in claimed {
            let Ok(slot) = shared.turns.clone().acquire_owned().await else {
                break;
            };
            spawn_turns(shared.clone(), run, FirstTurn::Claimed(None), slot);
        }
    }
}

/// How long to sleep with nothing to do: until the next timer or lease expiry, at most
/// `idle_poll` (runs started by another process do not poke our `wake`).
async fn idle_wait(shared: &Shared) -> Duration {
    let cap = shared.config.idle_poll;
    match shared.store.next_wake_at(&shared.scope).await {
        Ok(Some(at)) => {
            let ms = (at - shared.clock.now()).max(0) as u64;
            cap.min(Duration::from_millis(ms))
        }
        Ok(None) => cap,
        Err(e) => {
            tracing::warn!(error = %e, "reading the next wake-up failed");
            cap
        }
    }
}

/// How the first turn of [`spawn_turns`] starts.
pub(crate) enum FirstTurn {
    /// The run is claimed; replay this history (read it when `None`).
    Claimed(Option<History>),
    /// The sticky fast path: the run is suspended as this engine left it; replay the cached
    /// history with `result` applied and persist both in one write. If the store refuses (the
    /// run changed meanwhile) or fails, `result` is applied the ordinary way.
    Sticky(History, StepResult),
    /// Computed while the commit before it was in flight (see [`super::ahead`]); the run is as
    /// that commit left it.
    Ahead(Box<Planned>),
}

/// Executes turns of `run` until it stops being runnable: a run woken while its turn executed
/// stays claimed and turns again at once, a turn computed ahead of its commit follows it (see
/// [`super::ahead`]), and a refused sticky write's result is recorded with the run (if
/// suspended) claimed for its next turn here. `slot` is held throughout, so shutdown can wait
/// for it.
pub(crate) fn spawn_turns(
    shared: Arc<Shared>,
    run: Run,
    first: FirstTurn,
    slot: OwnedSemaphorePermit,
) {
    // Listed before the task starts, so a result of the run that arrives meanwhile is held.
    let id = run.id.clone();
    shared.turning.begin(&id);
    tokio::spawn(async move {
        let (mut run, mut next) = match first {
            FirstTurn::Claimed(history) => {
                // A parked run's recheck is not news unless it moves on.
                if !run.error.as_ref().is_some_and(parked_by_guard) {
                    shared.emit(&run, TenantEventKind::RunRunning, None);
                }
                (run, Persist::Turn(history))
            }
            // Never `running` in the store: the run moves on from `suspended` in one write.
            FirstTurn::Sticky(history, result) => (run, Persist::WithResult(history, result)),
            FirstTurn::Ahead(planned) => (run, Persist::Ahead(planned)),
        };
        loop {
            match turn(&shared, &run, next).await {
                // Shutting down: the lease is released and a restart resumes the run.
                Ok(TurnEnd::Again(again)) if shared.is_accepting() => {
                    let (again, history) = *again;
                    run = again;
                    next = Persist::Turn(Some(history));
                }
                // Persisted even when shutting down: its steps left already, and its slot is
                // still held (no further turn is computed ahead then).
                Ok(TurnEnd::Ahead(ahead)) => {
                    let (now, planned) = *ahead;
                    run = now;
                    next = Persist::Ahead(Box::new(planned));
                }
                // The result is recorded the ordinary way and, if the run is suspended, it is
                // claimed for its next turn here with the run still listed: a result held
                // meanwhile (one a turn computed ahead took, say) is applied by that turn before
                // any result that arrives later, so steps sent ahead of the refused write stay
                // consistent with what is recorded. Claimed during shutdown too, as this slot
                // is still held.
                Ok(TurnEnd::Refused(result)) => {
                    match record_claiming(&shared, *result, true).await {
                        Recorded::Claimed(claimed) => {
                            let (again, history) = *claimed;
                            if !again.error.as_ref().is_some_and(parked_by_guard) {
                                shared.emit(&again, TenantEventKind::RunRunning, None);
                            }
                            run = again;
                            next = Persist::Turn(Some(history));
                        }
                        Recorded::Unapplied(late) => {
                            tracing::debug!(run_id = %late.run_id, seq = late.seq, "ignored a late or duplicate step result");
                            break;
                        }
                        Recorded::Applied | Recorded::Failed => break,
                    }
                }
                Ok(_) => break,
                Err(e) => {
                    tracing::warn!(run_id = %id, error = %e, "turn failed; the run is retried when its lease expires");
                    break;
                }
            }
        }
        // The run is parked now (if it suspended), so held results take the sticky path. They
        // are tracked before the slot is released: shutdown waits for every slot, then for them.
        super::results::apply_later(&shared, shared.turning.end(&id));
        drop(slot);
    });
}

/// What a turn replays and how it is persisted.
enum Persist {
    /// An ordinary turn of a claimed run (history read here when `None`).
    Turn(Option<History>),
    /// A sticky turn: history with `result` applied, persisted together with it.
    WithResult(History, StepResult),
    /// A turn computed while the run's previous commit was in flight (see [`super::ahead`]).
    Ahead(Box<Planned>),
}

/// A turn computed and screened, ready to persist.
pub(super) struct Planned {
    /// The step result persisted with the turn (a sticky turn).
    with_result: Option<StepResult>,
    commit: TurnCommit,
    after: AfterCommit,
    /// The new remote steps that may leave before the commit, not sent yet.
    early: Vec<RemoteTask>,
}

impl Planned {
    /// Sends the steps that may leave before the commit now (see [`super::ahead`]).
    pub(super) async fn send_early(&mut self, shared: &Shared, id: &RunId) {
        dispatch(shared, id, std::mem::take(&mut self.early)).await;
    }

    /// The step result the turn was to persist, for whoever applies it instead.
    pub(super) fn into_result(self) -> Option<StepResult> {
        self.with_result
    }
}

/// How a turn ended.
pub(super) enum TurnEnd {
    /// The run stays claimed for another turn, replaying this history.
    Again(Box<(Run, History)>),
    /// Persisted, and the run's next turn, computed while this one's commit was in flight, is
    /// ready to persist on the run as it is now.
    Ahead(Box<(Run, Planned)>),
    /// Persisted, and the run suspended with the history this engine knows (it is parked in the
    /// sticky cache): as it is now.
    Parked(Box<Run>),
    /// Persisted, or the run was lost to cancellation or another driver.
    Done,
    /// The store refused (or failed) a sticky turn; the result still has to be applied.
    Refused(Box<StepResult>),
}

/// Executes one turn of `run` and persists it.
async fn turn(
    shared: &Arc<Shared>,
    run: &Run,
    persist: Persist,
) -> Result<TurnEnd, crate::store::StoreError> {
    let planned = match persist {
        Persist::Turn(Some(history)) => compute(shared, run, history, None).await,
        Persist::Turn(None) => {
            let history = History {
                checkpoints: shared.store.checkpoints(&shared.scope, &run.id).await?,
                signals: shared.store.buffered_signals(&run.id).await?,
            };
            compute(shared, run, history, None).await
        }
        Persist::WithResult(history, result) => compute(shared, run, history, Some(result)).await,
        Persist::Ahead(planned) => *planned,
    };
    persist_turn(shared, run, planned).await
}

/// Computes a turn of `run` replaying `history`, with `with_result` (already applied to
/// `history`) to persist along, and screens what it sends.
pub(super) async fn compute(
    shared: &Shared,
    run: &Run,
    history: History,
    with_result: Option<StepResult>,
) -> Planned {
    // What the turn replays; after a commit that only appends, the history it suspends with is
    // this plus the new checkpoints, and the store does not read it back.
    let replayed = history.clone();
    let now = shared.clock.now();
    let (commit, outgoing) = match shared.registry.get(&run.workflow, run.workflow_version) {
        // Not here: a worker announcing it on the run's partition turns it, or it parks.
        None => match super::remote::turn(shared, run, history, now).await {
            Ok(decision) => plan(run, decision, now, &shared.registry),
            Err(block) => (TurnCommit::new(block), Vec::new()),
        },
        Some(workflow) => {
            let History {
                checkpoints,
                signals,
            } = history;
            let input = TurnInput {
                run_id: run.id.clone(),
                namespace: run.namespace.clone(),
                input: run.input.clone(),
                history: checkpoints,
                signals,
                now,
            };
            let decision = run_turn(workflow, input, shared.clock.clone()).await;
            plan(run, decision, now, &shared.registry)
        }
    };
    let alike = replays_alike(&replayed, &commit);
    let (commit, mut after) = prepare(shared, run, replayed, commit, outgoing, now).await;
    let early = if shared.alone() && alike {
        after.take_new_steps(&commit)
    } else {
        Vec::new()
    };
    Planned {
        with_result,
        commit,
        after,
        early,
    }
}

/// Persists a computed turn of `run` and carries out what follows its commit. A result of the
/// run that arrives while the commit is in flight is turned at once (see [`super::ahead`]).
async fn persist_turn(
    shared: &Arc<Shared>,
    run: &Run,
    planned: Planned,
) -> Result<TurnEnd, crate::store::StoreError> {
    let Planned {
        with_result,
        commit,
        after,
        early,
    } = planned;
    let now = shared.clock.now();
    let write = async {
        let claim = shared.claim();
        match &with_result {
            None => {
                shared
                    .store
                    .commit_turn(&claim, &run.id, run.attempt, commit, now)
                    .await
            }
            Some(result) => {
                shared
                    .store
                    .apply_result_and_commit(result, &claim, run.attempt, commit, now)
                    .await
            }
        }
    };
    // The steps this commit creates leave while it is in flight: their trip to a worker and
    // back overlaps the commit. A result that beats the commit is held (see `Turning`), or
    // turned ahead.
    let ((written, ahead), ()) = tokio::join!(
        super::ahead::while_writing(shared, run, after.projection(), write),
        dispatch_early(shared, &run.id, early)
    );
    match settle(shared, run, written, with_result, after).await {
        Ok(end) => Ok(super::ahead::after_commit(shared, &run.id, end, ahead)),
        Err(e) => {
            if let Some(ahead) = ahead {
                super::ahead::abandon(shared, ahead);
            }
            Err(e)
        }
    }
}

/// Sends the steps of run `id` that leave while their turn's commit is in flight (`early`):
/// their trip to a worker and back overlaps the commit. A result that beats the commit is held
/// (see `Turning`), or turned ahead (see [`super::ahead`]).
pub(super) async fn dispatch_early(shared: &Shared, id: &RunId, early: Vec<RemoteTask>) {
    if early.is_empty() {
        return;
    }
    // The write is queued (polled first); yielding once lets the store's writer, a task of its
    // own, send it before the tasks take this thread. The commit then ends about when the first
    // result is back, rather than after it.
    tokio::task::yield_now().await;
    dispatch(shared, id, early).await
}

/// Carries out what follows a turn's write of `run`: the cancellation it met, or the rest of
/// the turn once `written`.
async fn settle(
    shared: &Shared,
    run: &Run,
    written: Result<Option<Committed>, crate::store::StoreError>,
    with_result: Option<StepResult>,
    after: AfterCommit,
) -> Result<TurnEnd, crate::store::StoreError> {
    let committed = match (written, with_result) {
        (Ok(None), Some(result)) => return Ok(TurnEnd::Refused(Box::new(result))),
        // The result is still applied, the ordinary way (which may well fail too).
        (Err(e), Some(result)) => {
            tracing::warn!(run_id = %run.id, error = %e, "a turn with a step result failed; recording the result alone");
            return Ok(TurnEnd::Refused(Box::new(result)));
        }
        (written, result) => (written?, result),
    };
    let now = shared.clock.now();
    let (Some(committed), with_result) = committed else {
        // Cancelled while the turn ran: finish the cancellation now that the turn is over.
        let patch = RunPatch {
            status: RunStatus::Cancelled,
            error: None,
        };
        let cancelled = shared
            .store
            .update_run_if(&shared.scope, &run.id, &[RunStatus::Cancelling], patch, now)
            .await?;
        match cancelled {
            Some(run) => shared.emit(&run, TenantEventKind::RunFailed, None),
            None => {
                tracing::warn!(run_id = %run.id, "lost the lease during a turn; its outcome was discarded")
            }
        }
        return Ok(TurnEnd::Done);
    };
    if let Some(result) = &with_result {
        shared.emit(
            &committed.run,
            TenantEventKind::StepCompleted,
            Some(result.seq),
        );
    }
    Ok(after.persisted(shared, run, committed).await)
}

/// Whether a turn that replayed `replayed` and makes `commit` would make it again if it had to
/// be computed anew, later: only then may its steps leave before it commits.
///
/// A step that leaves early is on nobody's record until the commit lands. If the commit is
/// refused (the run was woken or moved meanwhile), the run's next turn replays the history
/// again, and its steps are sent again. A step result names its run and position only (wire
/// §2.2), so the early step's result is applied to whatever step that next turn puts at the
/// same position. That is the same step only if the next turn takes the same path:
///
/// - Nothing it replays may have changed. A timer that came due, a signal that arrived, a child
///   that ended or another step's result would each be seen by the next turn and could send the
///   workflow down another branch (a step racing a timeout, say). So everything the turn
///   replayed must be resolved.
/// - Nothing the turn records may differ when run again. A local step or a side effect (`now()`
///   included) would run again and return something else, and a new timer or signal wait could
///   be resolved by then. So the turn may add remote steps only.
pub(super) fn replays_alike(replayed: &History, commit: &TurnCommit) -> bool {
    replayed.checkpoints.iter().all(|c| c.status.is_resolved())
        && commit
            .checkpoints
            .iter()
            .all(|c| c.kind == CheckpointKind::RemoteStep)
}

/// What a turn does once its commit is persisted: send the tasks that wait for it, announce what
/// it started and cancelled, and cache or re-turn the run.
pub(super) struct AfterCommit {
    tasks: Vec<RemoteTask>,
    /// The history after the commit, if it only appends to the one the turn replayed.
    appended: Option<History>,
    /// Whether the commit suspends the run.
    suspends: bool,
    children_started: Vec<RunId>,
}

/// Screens a turn's outgoing tasks with the dispatch guard (which may hold some back and park
/// the run) and notes what the commit will start. `run` is the run as the turn found it, and
/// `replayed` the history the turn replayed.
pub(super) async fn prepare(
    shared: &Shared,
    run: &Run,
    replayed: History,
    mut commit: TurnCommit,
    outgoing: Vec<Outgoing>,
    now: Millis,
) -> (TurnCommit, AfterCommit) {
    let before = run.error.as_ref();
    let tasks = super::guard::screen(shared, &mut commit, outgoing, before, now).await;
    let id = &run.id;
    let appended = commit
        .only_appends()
        .then(|| replayed.appended(id, &commit.checkpoints));
    let mut children_started: Vec<_> = commit.children.iter().map(|c| c.id.clone()).collect();
    if let TurnOutcome::Continue(next) = &commit.outcome {
        children_started.push(next.id.clone());
    }
    let after = AfterCommit {
        tasks,
        appended,
        suspends: matches!(commit.outcome, TurnOutcome::Suspend { .. }),
        children_started,
    };
    (commit, after)
}

impl AfterCommit {
    /// The history the commit leaves its run suspended with, if it only appends and suspends:
    /// what a result that arrives during the commit can be turned on (see [`super::ahead`]).
    pub(super) fn projection(&self) -> Option<&History> {
        self.appended.as_ref().filter(|_| self.suspends)
    }

    /// Takes out the tasks of the remote steps `commit` creates (not the retries of steps on
    /// record), which may leave before it commits: if it never does, their results find no
    /// checkpoint and are dropped, and the run's next turn, which makes the same steps (see
    /// [`replays_alike`]), sends them again.
    pub(super) fn take_new_steps(&mut self, commit: &TurnCommit) -> Vec<RemoteTask> {
        let created = |seq: u32| {
            commit
                .checkpoints
                .iter()
                .any(|c| c.seq == seq && c.kind == CheckpointKind::RemoteStep)
        };
        let (new, rest) = std::mem::take(&mut self.tasks)
            .into_iter()
            .partition(|task| created(task.seq));
        self.tasks = rest;
        new
    }

    /// Carries out the rest of the turn of `run` (as it was before the turn), now `committed`.
    pub(super) async fn persisted(
        self,
        shared: &Shared,
        run: &Run,
        committed: Committed,
    ) -> TurnEnd {
        let Committed {
            run: updated,
            history,
            cancelled,
        } = committed;
        for id in &cancelled {
            shared.announce_cancel(id).await;
        }
        // Cached before the dispatch, so that even the fastest result finds it.
        let mut parked = false;
        let again = match (updated.status, history.or(self.appended)) {
            // Woken during the turn: still ours, and owed another turn.
            (RunStatus::Running, Some(history)) => Some(history),
            (RunStatus::Suspended, Some(history)) => {
                if let Some(at) = updated.wake_at {
                    shared.wake_by(at);
                }
                shared.sticky.park(updated.clone(), history);
                parked = true;
                None
            }
            _ => None,
        };
        dispatch(shared, &run.id, self.tasks).await;
        let started_children = !self.children_started.is_empty();
        for child in self.children_started {
            if let Ok(Some(child)) = shared.store.get_run(&shared.scope, &child).await {
                shared.emit(&child, TenantEventKind::RunStarted, None);
            }
        }
        if started_children {
            shared.wake.notify_one();
        }
        if let Some(history) = again {
            return TurnEnd::Again(Box::new((updated, history)));
        }
        // Not news: parked again for the same reason, or still suspended after a sticky turn
        // (its step's completion was announced).
        let unchanged = match updated.status {
            RunStatus::Blocked => updated.error == run.error,
            RunStatus::Suspended => run.status == RunStatus::Suspended,
            _ => false,
        };
        if !unchanged {
            shared.emit(&updated, TenantEventKind::for_status(updated.status), None);
        }
        if parked {
            TurnEnd::Parked(Box::new(updated))
        } else {
            TurnEnd::Done
        }
    }
}

/// Queues `tasks` of run `id`. A fan-out's tasks go out together (a multiplexed broker
/// connection pipelines them); a failed dispatch is left to the redispatch loop, as the step's
/// checkpoint is (or is about to be) on record.
pub(super) async fn dispatch(shared: &Shared, id: &RunId, tasks: Vec<RemoteTask>) {
    let sends = tasks
        .into_iter()
        .map(|task| shared.transport.dispatch(task));
    for sent in futures::future::join_all(sends).await {
        if let Err(e) = sent {
            tracing::warn!(run_id = %id, error = %e, "dispatch failed; the redispatch loop will retry");
        }
    }
}

/// Turns a decision into the durable commit and the tasks to dispatch after it.
pub(super) fn plan(
    run: &Run,
    decision: Decision,
    now: i64,
    registry: &Registry,
) -> (TurnCommit, Vec<Outgoing>) {
    let mut checkpoints = Vec::with_capacity(decision.commands.len());
    let mut fired_timers = Vec::new();
    let mut redispatched = Vec::new();
    let mut consumed_signals = Vec::new();
    let mut timed_out_signals = Vec::new();
    let mut timed_out_steps = Vec::new();
    let mut children = Vec::new();
    let mut cancel_runs = Vec::new();
    let mut tasks = Vec::new();
    for command in decision.commands {
        match command {
            Command::Call {
                seq,
                name,
                input,
                retry,
                timeout_ms,
                requires,
            } => {
                let group = routing_token(&name, Some(&run.namespace));
                let task = RemoteTask {
                    run_id: run.id.clone(),
                    seq,
                    name: name.clone(),
                    step_id: step_id(&run.id, seq),
                    group: group.clone(),
                    input: Some(input.clone()),
                    context: Some(serde_json::json!({ "tenant": run.namespace })),
                    attempt: 1,
                    reply_to: None,
                };
                tasks.push(Outgoing { task, requires });
                checkpoints.push(NewCheckpoint {
                    retry_policy: retry,
                    timeout_ms,
                    ..NewCheckpoint::remote_step(seq, name, group, input, now)
                });
            }
            Command::RecordStep {
                seq,
                name,
                output,
                error,
                started_at,
                finished_at,
            } => checkpoints.push(NewCheckpoint::recorded_step(
                seq,
                name,
                output,
                error,
                started_at,
                finished_at,
            )),
            Command::Sleep { seq, ms } => checkpoints.push(NewCheckpoint {
                seq,
                kind: CheckpointKind::Sleep,
                name: format!("sleep:{seq}"),
                status: CheckpointStatus::Pending,
                worker_group: None,
                input: None,
                output: None,
                error: None,
                wake_at: Some(now.saturating_add(i64::try_from(ms).unwrap_or(i64::MAX))),
                enqueued_at: None,
                started_at: Some(now),
                finished_at: None,
                retry_policy: None,
                timeout_ms: None,
            }),
            Command::FireTimer { seq } => fired_timers.push(seq),
            Command::CancelRun { id } => cancel_runs.push(id),
            Command::RetryStep {
                seq,
                name,
                input,
                attempt,
                requires,
            } => {
                let task = RemoteTask {
                    run_id: run.id.clone(),
                    seq,
                    step_id: step_id(&run.id, seq),
                    group: routing_token(&name, Some(&run.namespace)),
                    name,
                    input: Some(input),
                    context: Some(serde_json::json!({ "tenant": run.namespace })),
                    attempt,
                    reply_to: None,
                };
                tasks.push(Outgoing { task, requires });
                redispatched.push(seq);
            }
            Command::WaitSignal {
                seq,
                signal,
                timeout_ms,
            } => {
                let deadline =
                    timeout_ms.map(|ms| now.saturating_add(i64::try_from(ms).unwrap_or(i64::MAX)));
                checkpoints.push(signal_wait(seq, signal, deadline, now));
            }
            Command::ConsumeSignal {
                seq,
                signal,
                signal_id,
            } => {
                // Inserted pending (a no-op if the wait already exists), then completed with the
                // payload in the same transaction.
                checkpoints.push(signal_wait(seq, signal, None, now));
                consumed_signals.push((signal_id, seq));
            }
            Command::SignalTimedOut { seq } => timed_out_signals.push(seq),
            Command::StepTimedOut { seq } => timed_out_steps.push(seq),
            Command::StartChild {
                seq,
                workflow,
                input,
            } => {
                // A child belongs to its parent's namespace, whoever executes the parent; it
                // starts on the newest version registered here (or parks as blocked if none).
                let version = registry.latest(&workflow).map_or(1, |w| w.version);
                let mut child = NewRun::top_level(
                    child_run_id(&run.id, seq),
                    run.namespace.clone(),
                    workflow.clone(),
                    version,
                    input.clone(),
                );
                child.parent_run_id = Some(run.id.clone());
                child.root_run_id = run.root_run_id.clone();
                child.nesting_depth = run.nesting_depth + 1;
                children.push(child);
                checkpoints.push(NewCheckpoint {
                    seq,
                    kind: CheckpointKind::Child,
                    name: workflow,
                    status: CheckpointStatus::Pending,
                    worker_group: None,
                    input: Some(input),
                    output: None,
                    error: None,
                    wake_at: None,
                    enqueued_at: Some(now),
                    started_at: None,
                    finished_at: None,
                    retry_policy: None,
                    timeout_ms: None,
                });
            }
        }
    }
    let outcome = match decision.status {
        DecisionStatus::Continue => TurnOutcome::Suspend {
            wake_at: decision.next_wake,
        },
        DecisionStatus::Completed { output } => TurnOutcome::Complete(output),
        DecisionStatus::Failed { error } => TurnOutcome::Fail(error),
        DecisionStatus::ContinuedAsNew { input } => {
            // Same workflow (newest version), namespace and lineage; a clean history.
            let version = registry
                .latest(&run.workflow)
                .map_or(run.workflow_version, |w| w.version);
            let mut next = NewRun::top_level(
                successor_id(&run.id),
                run.namespace.clone(),
                run.workflow.clone(),
                version,
                input,
            );
            next.parent_run_id = run.parent_run_id.clone();
            next.root_run_id = run.root_run_id.clone();
            next.nesting_depth = run.nesting_depth;
            next.tags = run.tags.clone();
            next.search_attributes = run.search_attributes.clone();
            next.continued_from = Some(run.id.clone());
            TurnOutcome::Continue(Box::new(next))
        }
    };
    (
        TurnCommit {
            checkpoints,
            redispatched,
            fired_timers,
            consumed_signals,
            timed_out_signals,
            timed_out_steps,
            children,
            cancel_runs,
            outcome,
        },
        tasks,
    )
}

fn signal_wait(seq: u32, name: String, deadline: Option<i64>, now: i64) -> NewCheckpoint {
    NewCheckpoint {
        seq,
        kind: CheckpointKind::Signal,
        name,
        status: CheckpointStatus::Pending,
        worker_group: None,
        input: None,
        output: None,
        error: None,
        wake_at: deadline,
        enqueued_at: None,
        started_at: Some(now),
        finished_at: None,
        retry_policy: None,
        timeout_ms: None,
    }
}

/// The id of a run's ContinueAsNew successor: `<base>:c<n+1>` after `<base>:c<n>`, so a
/// replayed decision never starts two successors.
fn successor_id(id: &RunId) -> RunId {
    let raw = id.as_str();
    let (base, n) = match raw.rsplit_once(":c") {
        Some((base, n)) if !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()) => {
            (base, n.parse::<u64>().unwrap_or(0))
        }
        _ => (raw, 0),
    };
    RunId::parse(&format!("{base}:c{}", n + 1)).unwrap_or_else(|_| RunId::generate())
}
