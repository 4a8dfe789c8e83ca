//! Turns computed ahead: a run's next turn starts while its previous commit is still in flight.
//!
//! One at a time, a step's trip to a worker and back is often shorter than the commit of the
//! turn that sent it (the step left early, see `turn::execute::replays_alike`). Rather than
//! wait for that commit, a result that arrives during it is applied to the history the commit
//! will leave, the next turn is computed from it and its new steps leave at once. That turn is
//! persisted (with the result, as a sticky turn) as soon as the commit before it has landed: a
//! run's commits stay one after the other, and its steps do not wait for them.
//!
//! The turn computed ahead is followed only if the commit before it parked the run suspended, so
//! with exactly the history it was computed on (that commit only appended to what it replayed);
//! the write that persists it is the sticky write, which the store refuses if anything moved the
//! run since. Otherwise it is dropped and its result held again, ahead of any later one.
//!
//! Its early steps may then have left for nothing, and they were computed from a result whose
//! step the dropped commit was to record. This is the case `turn::execute::replays_alike` answers, as
//! long as that result is the one applied to the step: the run's next turn then makes the same
//! step and the same steps after it. So the run's next turn takes the held result before any
//! other: a refused write's own result is recorded and the run, if suspended, claimed for that
//! turn with the run still listed (see `turn::runner::spawn_turns`); a turn takes what is held before
//! it waits; and held results are applied in order once the run's turns are over.
//!
//! What this does not cover is a turn that never comes: a store that fails the record too, or
//! a run another turn moved meanwhile. Then the held result takes the ordinary path, which
//! gives it up within about a second and a half if its step is still not on record, and a step
//! sent ahead whose result comes back after another turn made a step at its position (after a
//! lease expiry, a redispatch or a restart) would be applied to that step. That is the hazard
//! every step sent before its commit already carries; a dispatch id that our workers echo would
//! close it (see bench/HISTORY.md, session 16).

//! What it saves: one commit's flush per step of a run waited on one at a time. The `cluster`
//! bench's one-at-a-time latency shows it (bench/HISTORY.md, session 17).

use std::future::Future;

use crate::driver::fast_path::parked::with_result;
use crate::driver::state::State;
use crate::model::{Run, StepOutcome, StepResult};
use crate::store::History;

/// Awaits `write`, the commit of a turn of `run` that leaves it suspended with `projected`
/// history (`None` if it does not). A result of the run held meanwhile (see
/// [`super::in_flight`]) is turned ahead on `projected` by `turn_ahead`, which computes the turn
/// it leads to and sends its early steps; that turn is returned, its steps sent before the
/// write is done.
pub(crate) async fn while_writing<T, P>(
    state: &State,
    run: &Run,
    projected: Option<&History>,
    write: impl Future<Output = T>,
    turn_ahead: impl AsyncFnOnce(History, StepResult) -> P,
) -> (T, Option<P>) {
    let Some(projected) = projected else {
        return (write.await, None);
    };
    let Some(arrivals) = state.in_flight.arrivals(&run.id) else {
        return (write.await, None);
    };
    tokio::pin!(write);
    loop {
        // Looked at before each wait: the wake-up keeps one permit, not one per result.
        if let Some(result) = state.in_flight.take_held(&run.id) {
            // The write goes on meanwhile (a store may only queue it once it is polled).
            let ahead = async {
                match turnable(state, run, projected, &result) {
                    Some(history) => Some(turn_ahead(history, result).await),
                    None => {
                        hold_again(state, result);
                        None
                    }
                }
            };
            return tokio::join!(&mut write, ahead);
        }
        tokio::select! {
            biased;
            written = &mut write => return (written, None),
            () = arrivals.notified() => {}
        }
    }
}

/// The history `result` turns `run` on from `projected`, or `None` when it cannot be turned
/// ahead: not a completion, not a step the history waits for, a workflow not turned here, or
/// the engine stopping.
fn turnable(state: &State, run: &Run, projected: &History, result: &StepResult) -> Option<History> {
    let local = state
        .registry
        .get(&run.workflow, run.workflow_version)
        .is_some();
    let completed = matches!(result.outcome, StepOutcome::Completed { .. });
    if !(local && completed && state.is_accepting()) {
        return None;
    }
    with_result(projected.clone(), result, state.clock.now())
}

/// Holds `result` for its run again, ahead of any result that arrived after it; queues it for
/// the results loop now if the run's turn is over.
pub(crate) fn hold_again(state: &State, result: StepResult) {
    if let Some(result) = state.in_flight.hold_again(result) {
        state.requeue(vec![result]);
    }
}
