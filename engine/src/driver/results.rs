//! The results loop: apply each step result once and wake its run.

use std::sync::Arc;

use futures::{FutureExt, StreamExt};
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::drive::{FirstTurn, spawn_turns};
use super::shared::Shared;
use super::sticky::{Parked, with_result};
use crate::model::{
    CheckpointStatus, Run, RunId, RunStatus, StepOutcome, StepResult, TenantEventKind, step_id,
};
use crate::store::History;
use crate::transport::Subscription;

pub(crate) async fn results_loop(
    shared: Arc<Shared>,
    mut results: Subscription<StepResult>,
    mut stop: watch::Receiver<bool>,
) {
    // Results are applied concurrently, so the store commits a burst of them together.
    let mut applying = JoinSet::new();
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            next = results.next() => match next {
                Some(result) => {
                    applying.spawn(apply(shared.clone(), result));
                    while applying.try_join_next().is_some() {}
                }
                None => break,
            },
        }
    }
    // Results that already arrived are applied before stopping, so their steps do not re-run.
    while let Some(Some(result)) = results.next().now_or_never() {
        applying.spawn(apply(shared.clone(), result));
    }
    while applying.join_next().await.is_some() {}
}

/// How long a result whose step has no checkpoint yet waits between tries (ms), in all about
/// 1.4 s. Its step left early and the commit that records it is in flight on another control
/// plane (or failed: then the run's next turn sends the step again). Quadrupling keeps a busy
/// store, whose commits take tens of milliseconds, from being asked many times.
const EARLY_RESULT_WAITS: [u64; 6] = [1, 4, 16, 64, 256, 1024];

/// Applies one step result (see [`apply_once`]). A result whose step is not on record yet is
/// tried again for a while (see [`EARLY_RESULT_WAITS`]); a late or duplicate one is dropped.
pub(crate) async fn apply(shared: Arc<Shared>, result: StepResult) {
    if result.step_id != step_id(&result.run_id, result.seq) {
        tracing::warn!(step_id = %result.step_id, run_id = %result.run_id, seq = result.seq, "dropping a result whose stepId does not match runId:seq");
        return;
    }
    let mut result = result;
    let mut waits = EARLY_RESULT_WAITS.into_iter();
    loop {
        let early = match apply_once(&shared, result).await {
            Tried::Applied => return,
            Tried::NotOnRecord(early) => early,
            Tried::Unapplied(unapplied) => {
                let on_record = shared
                    .store
                    .checkpoints(&shared.scope, &unapplied.run_id)
                    .await
                    .map(|cps| cps.iter().any(|c| c.seq == unapplied.seq));
                match on_record {
                    Ok(false) => unapplied,
                    Ok(true) => {
                        tracing::debug!(run_id = %unapplied.run_id, seq = unapplied.seq, "ignored a late or duplicate step result");
                        return;
                    }
                    Err(e) => {
                        tracing::warn!(run_id = %unapplied.run_id, seq = unapplied.seq, error = %e, "could not read a result's step; the step will be redispatched");
                        return;
                    }
                }
            }
        };
        let Some(ms) = waits.next() else {
            tracing::warn!(run_id = %early.run_id, seq = early.seq, "dropped a step result: its step is still not on record (the turn that sent it did not commit, and the run sends it again)");
            return;
        };
        tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
        result = early;
    }
}

/// What became of a step result after one try.
enum Tried {
    /// Applied, or held for the run's work here to apply after.
    Applied,
    /// Its step was not on record when its run was read.
    NotOnRecord(StepResult),
    /// No checkpoint accepted it: it is late or a duplicate, or its step is not on record.
    Unapplied(StepResult),
}

/// Applies one step result with its run listed here (see [`super::turning`]; a result that
/// arrives for a listed run is held and applied after): on the sticky path if the run is
/// suspended with a turn slot free (see [`sticky_turn`]), else recorded in the store, which
/// claims the run for a turn here when a slot is free.
async fn apply_once(shared: &Arc<Shared>, result: StepResult) -> Tried {
    let id = result.run_id.clone();
    let Some(result) = shared.turning.begin_applying(result) else {
        return Tried::Applied;
    };
    let tried = match sticky_turn(shared, result).await {
        Sticky::Turned => Tried::Applied,
        Sticky::NotOnRecord(result) => Tried::NotOnRecord(result),
        Sticky::Declined(result) => match record(shared, result).await {
            Some(unapplied) => Tried::Unapplied(unapplied),
            None => Tried::Applied,
        },
    };
    apply_later(shared, shared.turning.end(&id));
    tried
}

/// Applies `held` results of one run, in their order (the first may be one a turn took and
/// held again, which must be applied before a later result of the same step), in a task that
/// shutdown waits for.
pub(crate) fn apply_later(shared: &Arc<Shared>, held: Vec<StepResult>) {
    if held.is_empty() {
        return;
    }
    let owned = shared.clone();
    shared.applying.spawn(async move {
        for result in held {
            apply(owned.clone(), result).await;
        }
    });
}

/// What the sticky path did with a result.
enum Sticky {
    /// The run's next turn took it.
    Turned,
    /// The run is suspended and its step is not on record: it left before the commit that
    /// records it, sent by a control plane that believed it was alone. Nothing is written (a
    /// write would wait for that commit's lock on the run), and the result is tried again.
    NotOnRecord(StepResult),
    /// Anything else: the result is recorded the ordinary way.
    Declined(StepResult),
}

/// Turns the run of a completed step's `result` at once, with the result applied to the
/// history it suspended with, and persists both in one write (see [`super::sticky`]).
/// Declines when the run is not suspended, the history does not expect the result, or no turn
/// slot is free.
///
/// The history is the one cached here when this engine parked the run, unchecked: the write
/// refuses it if a peer moved the run since, and the result is then recorded the ordinary way.
/// With peers that costs a wasted turn now and then, never a wrong one, because a turn's steps
/// leave before its commit only when no peer shares the store (see [`super::turning`]); and it
/// is rare, because a step's result comes back to the control plane that sent it (the task
/// names its results queue). Otherwise the run is read from the store: the result came from a
/// worker that answers on the shared queue, or the cache forgot the run. Three reads cost far
/// less than the two writes (record and claim, then the turn) of the way round.
async fn sticky_turn(shared: &Arc<Shared>, result: StepResult) -> Sticky {
    // Taken whatever happens next: the run moves on, so the entry would be stale.
    let cached = shared.sticky.take(&result.run_id);
    if !matches!(result.outcome, StepOutcome::Completed { .. }) {
        return Sticky::Declined(result);
    }
    let Some(slot) = shared.try_turn_slot() else {
        return Sticky::Declined(result);
    };
    let parked = match cached {
        Some(parked) => Some(parked),
        None => suspended(shared, &result.run_id).await,
    };
    let Some(Parked { run, history }) = parked else {
        return Sticky::Declined(result);
    };
    if !history.checkpoints.iter().any(|c| c.seq == result.seq) {
        return Sticky::NotOnRecord(result);
    }
    let Some(history) = with_result(history, &result, shared.clock.now()) else {
        return Sticky::Declined(result);
    };
    spawn_turns(
        shared.clone(),
        run,
        FirstTurn::Sticky(history, result),
        slot,
    );
    Sticky::Turned
}

/// Run `id` and its history as the store has them, if it is suspended. The run is read first:
/// whatever moves it after that read also bumps its `attempt` or wakes it, and the sticky
/// write, which checks both, is refused.
async fn suspended(shared: &Shared, id: &RunId) -> Option<Parked> {
    let run = match shared.store.get_run(&shared.scope, id).await {
        Ok(Some(run)) if run.status == RunStatus::Suspended => run,
        Ok(_) => return None,
        Err(e) => {
            tracing::debug!(run_id = %id, error = %e, "could not read a result's run");
            return None;
        }
    };
    let read = tokio::try_join!(
        shared.store.checkpoints(&shared.scope, id),
        shared.store.buffered_signals(id)
    );
    match read {
        Ok((checkpoints, signals)) => Some(Parked {
            run,
            history: History {
                checkpoints,
                signals,
            },
        }),
        Err(e) => {
            tracing::debug!(run_id = %id, error = %e, "could not read a result's run history");
            None
        }
    }
}

/// Records a step result in the store, which claims its run for a turn here when a slot is
/// free. Hands the result back if no checkpoint accepted it.
async fn record(shared: &Arc<Shared>, result: StepResult) -> Option<StepResult> {
    // With a free turn slot, the run is claimed in the same write and its turn runs here at
    // once; otherwise the drive loop picks it up.
    let slot = shared.try_turn_slot();
    match (record_claiming(shared, result, slot.is_some()).await, slot) {
        (Recorded::Claimed(claimed), Some(slot)) => {
            let (run, history) = *claimed;
            spawn_turns(shared.clone(), run, FirstTurn::Claimed(Some(history)), slot)
        }
        (Recorded::Unapplied(result), _) => return Some(result),
        (Recorded::Claimed(..) | Recorded::Applied, _) => shared.wake.notify_one(),
        (Recorded::Failed, _) => {}
    }
    None
}

/// What [`record_claiming`] did.
pub(crate) enum Recorded {
    /// Applied, and its run claimed here for a turn, which replays this history.
    Claimed(Box<(Run, History)>),
    /// Applied; the run is not claimed here.
    Applied,
    /// No checkpoint accepted it (it is late or a duplicate, or its step is not on record).
    Unapplied(StepResult),
    /// The store failed (logged); the step will be redispatched.
    Failed,
}

/// Records a step result in the store and, if `claim`, claims its run for a turn here in the
/// same write (the caller holds a turn slot for it).
pub(crate) async fn record_claiming(shared: &Shared, result: StepResult, claim: bool) -> Recorded {
    let claim = claim.then(|| shared.claim());
    match shared
        .store
        .apply_step_result(&result, shared.clock.now(), claim.as_ref())
        .await
    {
        Ok(Some(applied)) => {
            let kind = if applied.checkpoint.status == CheckpointStatus::Completed {
                TenantEventKind::StepCompleted
            } else {
                TenantEventKind::StepFailed
            };
            shared.emit(&applied.run, kind, Some(applied.checkpoint.seq));
            match applied.claimed {
                Some(history) => Recorded::Claimed(Box::new((applied.run, history))),
                None => Recorded::Applied,
            }
        }
        Ok(None) => Recorded::Unapplied(result),
        Err(e) => {
            tracing::warn!(run_id = %result.run_id, seq = result.seq, error = %e, "could not record a step result; the step will be redispatched");
            Recorded::Failed
        }
    }
}
