//! Persisting a turn: its commit is written under the claim it was computed under (with the
//! step result it applies, for a sticky turn), the steps that may leave early go out while the
//! write is in flight, and once it lands the rest follows: tasks are sent, cancellations and
//! children announced, and the run parked in the cache, turned again, or handed the turn
//! computed ahead of the commit.

use std::sync::Arc;
use std::time::Instant;

use crate::driver::fast_path::ahead;
use crate::driver::state::State;
use crate::fair;
use crate::metrics::{self, StepTimes};
use crate::model::{
    CheckpointKind, Millis, RemoteTask, Run, RunId, RunStatus, StepResult, TenantEventKind,
};
use crate::store::{Committed, History, RunPatch, StoreError, TurnCommit, TurnOutcome};
use crate::trace_context;
use crate::transport::naming::token_tenant;

use super::guard::{self, Outgoing};

/// A turn computed and screened, ready to persist.
pub(crate) struct Prepared {
    /// The step result persisted with the turn (a sticky turn).
    pub(super) with_result: Option<StepResult>,
    /// That step's checkpoint with the result applied, for its metrics once committed.
    pub(super) finished_step: Option<StepTimes>,
    pub(super) commit: TurnCommit,
    pub(super) after: AfterCommit,
    /// The new remote steps that may leave before the commit, not sent yet.
    pub(super) early: Vec<RemoteTask>,
}

impl Prepared {
    /// Sends the steps that may leave before the commit now (see [`ahead`]).
    pub(crate) async fn send_early(&mut self, state: &State, id: &RunId) {
        dispatch(state, id, std::mem::take(&mut self.early)).await;
    }

    /// The step result the turn was to persist, for whoever applies it instead.
    pub(crate) fn into_result(self) -> Option<StepResult> {
        self.with_result
    }
}

/// How a turn ended.
pub(crate) enum TurnEnd {
    /// The run stays claimed for another turn, replaying this history.
    Again(Box<(Run, History)>),
    /// Persisted, and the run's next turn, computed while this one's commit was in flight, is
    /// ready to persist on the run as it is now.
    Ahead(Box<(Run, Prepared)>),
    /// Persisted, and the run suspended with the history this engine knows (it is parked in the
    /// sticky cache): as it is now.
    Parked(Box<Run>),
    /// Persisted, or the run was lost to cancellation or another driver.
    Done,
    /// The store refused (or failed) a sticky turn; the result still has to be applied.
    Refused(Box<StepResult>),
}

/// Persists a computed turn of `run` and carries out what follows its commit. A result of the
/// run that arrives while the commit is in flight is turned at once (see [`ahead`]).
/// `turn_ahead` computes that turn from the projected history and the result.
pub(super) async fn persist_turn(
    state: &Arc<State>,
    run: &Run,
    prepared: Prepared,
    turn_ahead: impl AsyncFnOnce(History, StepResult) -> Prepared,
) -> Result<TurnEnd, StoreError> {
    let Prepared {
        with_result,
        finished_step,
        commit,
        after,
        early,
    } = prepared;
    let now = state.clock.now();
    let local_steps = local_steps(&commit);
    let write = fair::within(state.lane(&run.namespace, &run.workflow), async {
        let claim = state.claim();
        let began = Instant::now();
        let written = match &with_result {
            None => {
                state
                    .store
                    .commit_turn(&claim, &run.id, run.attempt, commit, now)
                    .await
            }
            Some(result) => {
                state
                    .store
                    .apply_result_and_commit(result, &claim, run.attempt, commit, now)
                    .await
            }
        };
        metrics::committed(&run.namespace, began.elapsed());
        written
    });
    // The steps this commit creates leave while it is in flight: their trip to a worker and
    // back overlaps the commit. A result that beats the commit is held (see `fast_path::in_flight`), or
    // turned ahead.
    let ((written, ahead), ()) = tokio::join!(
        ahead::while_writing(state, run, after.projection(), write, turn_ahead),
        dispatch_early(state, &run.id, early)
    );
    if matches!(written, Ok(Some(_))) {
        let steps = local_steps.iter().chain(&finished_step);
        for step in steps {
            state.step_finished(&run.namespace, step);
        }
    }
    match settle(state, run, written, with_result, after).await {
        Ok(end) => Ok(after_commit(state, &run.id, end, ahead)),
        Err(e) => {
            if let Some(ahead) = ahead {
                abandon(state, ahead);
            }
            Err(e)
        }
    }
}

/// The local steps `commit` records (markers left out), for their metrics once committed.
pub(super) fn local_steps(commit: &TurnCommit) -> Vec<StepTimes> {
    commit
        .checkpoints
        .iter()
        .filter(|c| c.kind == CheckpointKind::LocalStep && c.finished_at.is_some())
        .map(|c| StepTimes {
            name: c.name.clone(),
            enqueued_at: c.enqueued_at,
            started_at: c.started_at,
            finished_at: c.finished_at,
        })
        .collect()
}

/// Sends the steps of run `id` that leave while their turn's commit is in flight (`early`):
/// their trip to a worker and back overlaps the commit. A result that beats the commit is held
/// (see `fast_path::in_flight`), or turned ahead (see [`ahead`]).
pub(crate) async fn dispatch_early(state: &State, id: &RunId, early: Vec<RemoteTask>) {
    if early.is_empty() {
        return;
    }
    // The write is queued (polled first); yielding once lets the store's writer, a task of its
    // own, send it before the tasks take this thread. The commit then ends about when the first
    // result is back, rather than after it.
    tokio::task::yield_now().await;
    dispatch(state, id, early).await
}

/// Carries out what follows a turn's write of `run`: the cancellation it met, or the rest of
/// the turn once `written`.
async fn settle(
    state: &State,
    run: &Run,
    written: Result<Option<Committed>, StoreError>,
    with_result: Option<StepResult>,
    after: AfterCommit,
) -> Result<TurnEnd, StoreError> {
    let committed = match (written, with_result) {
        (Ok(None), Some(result)) => return Ok(TurnEnd::Refused(Box::new(result))),
        // The result is still applied, the ordinary way (which may well fail too).
        (Err(e), Some(result)) => {
            tracing::warn!(run_id = %run.id, error = %e, "a turn with a step result failed; recording the result alone");
            return Ok(TurnEnd::Refused(Box::new(result)));
        }
        (written, result) => (written?, result),
    };
    let now = state.clock.now();
    let (Some(committed), with_result) = committed else {
        // Cancelled while the turn ran: finish the cancellation now that the turn is over.
        let patch = RunPatch {
            status: RunStatus::Cancelled,
            error: None,
        };
        let cancelled = state
            .store
            .update_run_if(&state.scope, &run.id, &[RunStatus::Cancelling], patch, now)
            .await?;
        match cancelled {
            Some(run) => state.emit(&run, TenantEventKind::RunFailed, None),
            None => {
                tracing::warn!(run_id = %run.id, "lost the lease during a turn; its outcome was discarded")
            }
        }
        return Ok(TurnEnd::Done);
    };
    if let Some(result) = &with_result {
        state.emit(
            &committed.run,
            TenantEventKind::StepCompleted,
            Some(result.seq),
        );
    }
    Ok(after.persisted(state, run, committed).await)
}

/// What a turn does once its commit is persisted: send the tasks that wait for it, announce what
/// it started and cancelled, and cache or re-turn the run.
pub(crate) struct AfterCommit {
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
pub(crate) async fn prepare(
    state: &State,
    run: &Run,
    replayed: History,
    mut commit: TurnCommit,
    outgoing: Vec<Outgoing>,
    now: Millis,
) -> (TurnCommit, AfterCommit) {
    let before = run.error.as_ref();
    let tasks = guard::screen(state, &mut commit, outgoing, before, now).await;
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
    /// what a result that arrives during the commit can be turned on (see [`ahead`]).
    pub(crate) fn projection(&self) -> Option<&History> {
        self.appended.as_ref().filter(|_| self.suspends)
    }

    /// Takes out the tasks of the remote steps `commit` creates (not the retries of steps on
    /// record), which may leave before it commits: if it never does, their results find no
    /// checkpoint and are dropped, and the run's next turn, which makes the same steps (see
    /// [`super::execute::replays_alike`]), sends them again.
    pub(crate) fn take_new_steps(&mut self, commit: &TurnCommit) -> Vec<RemoteTask> {
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
    pub(crate) async fn persisted(self, state: &State, run: &Run, committed: Committed) -> TurnEnd {
        let Committed {
            run: updated,
            history,
            cancelled,
        } = committed;
        for id in &cancelled {
            state.announce_cancel(id).await;
        }
        // Cached before the dispatch, so that even the fastest result finds it.
        let mut parked = false;
        let again = match (updated.status, history.or(self.appended)) {
            // Woken during the turn: still ours, and owed another turn.
            (RunStatus::Running, Some(history)) => Some(history),
            (RunStatus::Suspended, Some(history)) => {
                if let Some(at) = updated.wake_at {
                    state.wake_by(at);
                }
                state.parked.park(updated.clone(), history);
                parked = true;
                None
            }
            _ => None,
        };
        dispatch(state, &run.id, self.tasks).await;
        let started_children = !self.children_started.is_empty();
        for child in self.children_started {
            if let Ok(Some(child)) = state.store.get_run(&state.scope, &child).await {
                state.emit(&child, TenantEventKind::RunStarted, None);
            }
        }
        if started_children {
            state.queued(&run.namespace);
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
            state.emit(&updated, TenantEventKind::for_status(updated.status), None);
        }
        if updated.status.is_terminal() && updated.parent_run_id.is_none() {
            let plans = state.plans.current(&*state.store).await;
            if updated.concurrency.is_some()
                || plans.max_concurrent_runs(&updated.namespace).is_some()
            {
                // A slot under its key's limit or its tenant's ceiling came free: a queued run
                // may start now.
                state.queued(&updated.namespace);
            }
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
pub(crate) async fn dispatch(state: &State, id: &RunId, tasks: Vec<RemoteTask>) {
    // Each in its tenant's lane: a transport that queues tasks for a shared worker serves them
    // by the tenant's weight.
    let sends = tasks.into_iter().map(|mut task| {
        trace_context::stamp(&mut task);
        let lane = state.lane(&token_tenant(&task.group), &task.name);
        fair::within(lane, state.transport.dispatch(task))
    });
    for sent in futures::future::join_all(sends).await {
        if let Err(e) = sent {
            tracing::warn!(run_id = %id, error = %e, "dispatch failed; the redispatch loop will retry");
        }
    }
}

/// What follows a commit of run `id` that `end`ed so, with the turn computed `ahead` of it, if
/// any: that turn, on the run as the commit left it, if the commit parked the run suspended
/// (then with the history the turn was computed on, as the commit only appended to what it
/// replayed); otherwise `end`, and the turn is dropped.
pub(crate) fn after_commit(
    state: &State,
    id: &RunId,
    end: TurnEnd,
    ahead: Option<Prepared>,
) -> TurnEnd {
    match (end, ahead) {
        (TurnEnd::Parked(run), Some(ahead)) => {
            // The run moves on: its cached entry would be stale.
            state.parked.take(id);
            TurnEnd::Ahead(Box::new((*run, ahead)))
        }
        (end, Some(ahead)) => {
            abandon(state, ahead);
            end
        }
        (end, None) => end,
    }
}

/// Drops a turn computed ahead; its result is applied the ordinary way once the run's turn is
/// over.
pub(crate) fn abandon(state: &State, ahead: Prepared) {
    if let Some(result) = ahead.into_result() {
        ahead::hold_again(state, result);
    }
}
