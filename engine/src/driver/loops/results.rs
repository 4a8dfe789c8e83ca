//! The results loop: applies each step result once and wakes its run. A result of a run that
//! is turning here is held by the in-flight registry and comes back to this loop's queue
//! (`requeued`) once the run's turn is over, so every result is applied from here.

use std::sync::Arc;

use futures::{FutureExt, StreamExt};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

use crate::driver::fast_path::Parked;
use crate::driver::fast_path::parked::with_result;
use crate::driver::state::State;
use crate::driver::turn::record::{Recorded, record_claiming};
use crate::driver::turn::runner::{FirstTurn, spawn_turns};
use crate::model::{Run, RunId, RunStatus, StepOutcome, StepResult, step_id};
use crate::store::History;
use crate::transport::Subscription;

/// Results held for a run while it turned here, in their order, queued back for this loop.
pub(crate) type Requeued = mpsc::UnboundedReceiver<Vec<StepResult>>;

/// Applies results from the transport and from `requeued` until `stop`; then applies what
/// already arrived, waits for the turns still executing and applies what they held.
pub(crate) async fn results_loop(
    state: Arc<State>,
    mut results: Subscription<StepResult>,
    mut requeued: Requeued,
    mut stop: watch::Receiver<bool>,
) {
    // Results are applied concurrently, so the store commits a burst of them together.
    let mut applying = JoinSet::new();
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            next = results.next() => match next {
                Some(result) => {
                    applying.spawn(apply(state.clone(), result));
                }
                None => break,
            },
            Some(held) = requeued.recv() => {
                applying.spawn(apply_in_order(state.clone(), held));
            }
        }
        while applying.try_join_next().is_some() {}
    }
    // Results that already arrived are applied before stopping, so their steps do not re-run.
    while let Some(Some(result)) = results.next().now_or_never() {
        applying.spawn(apply(state.clone(), result));
    }
    // Turns still executing finish and queue what they held; none starts now, so once every
    // slot is free and nothing is being applied, what is queued is all there is.
    let turns_over = state.turns_finished();
    tokio::pin!(turns_over);
    let mut over = false;
    loop {
        tokio::select! {
            Some(held) = requeued.recv() => {
                applying.spawn(apply_in_order(state.clone(), held));
            }
            Some(_) = applying.join_next() => {}
            () = &mut turns_over, if !over => over = true,
        }
        while over && applying.is_empty() {
            match requeued.try_recv() {
                Ok(held) => {
                    applying.spawn(apply_in_order(state.clone(), held));
                }
                Err(_) => return,
            }
        }
    }
}

/// Applies `held` results of one run in their order: the first may be one a turn took and held
/// again, which must be applied before a later result of the same step.
async fn apply_in_order(state: Arc<State>, held: Vec<StepResult>) {
    for result in held {
        apply(state.clone(), result).await;
    }
}

/// How long a result whose step has no checkpoint yet waits between tries (ms), in all about
/// 1.4 s. Its step left early and the commit that records it is in flight on another control
/// plane (or failed: then the run's next turn sends the step again). Quadrupling keeps a busy
/// store, whose commits take tens of milliseconds, from being asked many times.
const EARLY_RESULT_WAITS: [u64; 6] = [1, 4, 16, 64, 256, 1024];

/// Applies one step result (see [`apply_once`]). A result whose step is not on record yet is
/// tried again for a while (see [`EARLY_RESULT_WAITS`]); a late or duplicate one is dropped.
async fn apply(state: Arc<State>, result: StepResult) {
    if result.step_id != step_id(&result.run_id, result.seq) {
        tracing::warn!(step_id = %result.step_id, run_id = %result.run_id, seq = result.seq, "dropping a result whose stepId does not match runId:seq");
        return;
    }
    let mut result = result;
    let mut waits = EARLY_RESULT_WAITS.into_iter();
    loop {
        let early = match apply_once(&state, result).await {
            Tried::Applied => return,
            Tried::NotOnRecord(early) => early,
            Tried::Unapplied(unapplied) => {
                let on_record = state
                    .store
                    .checkpoints(&state.scope, &unapplied.run_id)
                    .await
                    .map(|cps| cps.iter().any(|c| c.seq == unapplied.seq));
                match on_record {
                    Ok(false) => unapplied,
                    Ok(true) => {
                        tracing::debug!(run_id = %unapplied.run_id, seq = unapplied.seq, "ignored a late or duplicate step result");
                        return;
                    }
                    Err(e) => {
                        // Not dropped: its step would run again once the redispatch loop
                        // found its job gone.
                        tracing::warn!(run_id = %unapplied.run_id, seq = unapplied.seq, error = %e, "could not read a result's step; it goes back to the broker");
                        unapplied.receipt.give_back();
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

/// Applies one step result with its run listed here (see [`crate::driver::fast_path::in_flight`]; a result that
/// arrives for a listed run is held and applied after): on the sticky path if the run is
/// suspended with a turn slot free (see [`sticky_turn`]), else recorded in the store, which
/// claims the run for a turn here when a slot is free.
async fn apply_once(state: &Arc<State>, result: StepResult) -> Tried {
    let id = result.run_id.clone();
    let Some(result) = state.in_flight.begin_applying(result) else {
        return Tried::Applied;
    };
    let tried = match sticky_turn(state, result).await {
        Sticky::Turned => Tried::Applied,
        Sticky::NotOnRecord(result) => Tried::NotOnRecord(result),
        Sticky::Declined(result, known) => match record(state, result, known.as_deref()).await {
            Some(unapplied) => Tried::Unapplied(unapplied),
            None => Tried::Applied,
        },
    };
    state.requeue(state.in_flight.end(&id));
    tried
}

/// What the sticky path did with a result.
enum Sticky {
    /// The run's next turn took it.
    Turned,
    /// The run is suspended and its step is not on record: it left before the commit that
    /// records it, sent by a control plane that believed it was alone. Nothing is written (a
    /// write would wait for that commit's lock on the run), and the result is tried again.
    NotOnRecord(StepResult),
    /// Anything else: the result is recorded the ordinary way (with its run, if it was at hand).
    Declined(StepResult, Option<Box<Run>>),
}

/// Turns the run of a completed step's `result` at once, with the result applied to the
/// history it suspended with, and persists both in one write (see [`crate::driver::fast_path::parked`]).
/// Declines when the run is not suspended, its workflow is turned by a worker (the result is
/// recorded first, then), the history does not expect the result, or no turn slot is free.
///
/// The history is the one cached here when this engine parked the run, unchecked: the write
/// refuses it if a peer moved the run since, and the result is then recorded the ordinary way.
/// With peers that costs a wasted turn now and then, never a wrong one, because a turn's steps
/// leave before its commit only when no peer shares the store (see [`crate::driver::fast_path::in_flight`]); and it
/// is rare, because a step's result comes back to the control plane that sent it (the task
/// names its results queue). Otherwise the run is read from the store: the result came from a
/// worker that answers on the shared queue, or the cache forgot the run. Three reads cost far
/// less than the two writes (record and claim, then the turn) of the way round.
async fn sticky_turn(state: &Arc<State>, result: StepResult) -> Sticky {
    // Taken whatever happens next: the run moves on, so the entry would be stale.
    let cached = state.parked.take(&result.run_id);
    if !matches!(result.outcome, StepOutcome::Completed { .. }) {
        return Sticky::Declined(result, cached.map(|p| Box::new(p.run)));
    }
    let parked = match cached {
        Some(parked) => Some(parked),
        // Read only while a slot may be free: the ordinary way reads nothing first.
        None if state.turns.free() > 0 => suspended(state, &result.run_id).await,
        None => None,
    };
    let Some(Parked { run, history }) = parked else {
        return Sticky::Declined(result, None);
    };
    // A workflow turned by a worker: its turn's write waits for the worker's decision, as long
    // as that worker takes (a paused one, the turn's 30 s silence and its resends), and the
    // result must not wait with it, unrecorded: its step would look lost and be sent again.
    if state
        .registry
        .get(&run.workflow, run.workflow_version)
        .is_none()
    {
        return Sticky::Declined(result, Some(Box::new(run)));
    }
    let Some(slot) = state.try_turn_slot(&run.namespace) else {
        return Sticky::Declined(result, Some(Box::new(run)));
    };
    if !history.checkpoints.iter().any(|c| c.seq == result.seq) {
        return Sticky::NotOnRecord(result);
    }
    let Some(history) = with_result(history, &result, state.clock.now()) else {
        return Sticky::Declined(result, Some(Box::new(run)));
    };
    spawn_turns(state.clone(), run, FirstTurn::Sticky(history, result), slot);
    Sticky::Turned
}

/// Run `id` and its history as the store has them, if it is suspended. The run is read first:
/// whatever moves it after that read also bumps its `attempt` or wakes it, and the sticky
/// write, which checks both, is refused.
async fn suspended(state: &State, id: &RunId) -> Option<Parked> {
    let run = match state.store.get_run(&state.scope, id).await {
        Ok(Some(run)) if run.status == RunStatus::Suspended => run,
        Ok(_) => return None,
        Err(e) => {
            tracing::debug!(run_id = %id, error = %e, "could not read a result's run");
            return None;
        }
    };
    let read = tokio::try_join!(
        state.store.checkpoints(&state.scope, id),
        state.store.buffered_signals(id)
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
async fn record(state: &Arc<State>, result: StepResult, of: Option<&Run>) -> Option<StepResult> {
    // With a free turn slot the tenant may take, the run is claimed in the same write and its
    // turn runs here at once; otherwise the claim loop picks it up.
    let slot = match of {
        Some(run) => state.try_turn_slot(&run.namespace),
        None => state.try_unplaced_turn_slot(),
    };
    match (
        record_claiming(state, result, slot.is_some(), of).await,
        slot,
    ) {
        (Recorded::Claimed(claimed), Some(mut slot)) => {
            let (run, history) = *claimed;
            slot.hand_to(&run.namespace, state.plans.last_weight(&run.namespace));
            spawn_turns(state.clone(), run, FirstTurn::Claimed(Some(history)), slot)
        }
        (Recorded::Unapplied(result), _) => return Some(result),
        (Recorded::Claimed(claimed), None) => state.queued(&claimed.0.namespace),
        (Recorded::Applied(tenant), _) => state.queued(&tenant),
        // Held a moment before it goes back, so a store that is down is not asked again at
        // the broker's pace.
        (Recorded::Failed(given_back), _) => {
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            drop(given_back);
        }
    }
    None
}
