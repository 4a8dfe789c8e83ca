//! Turns computed ahead: a run's next turn starts while its previous commit is still in flight.
//!
//! One at a time, a step's trip to a worker and back is often shorter than the commit of the
//! turn that sent it (the step left early, see `drive::replays_alike`), so its result used to
//! wait for that commit before the run could move on: every step cost a commit's flush on top
//! of its own trip. Now a result that arrives during the commit is applied to the history the
//! commit will leave, the next turn is computed from it and its new steps leave at once. The
//! turn is persisted (with the result, as a sticky turn) as soon as the commit before it has
//! landed: a run's commits stay one after the other, its steps no longer wait for them.
//!
//! The turn computed ahead is followed only if the commit before it parked the run suspended, so
//! with exactly the history it was computed on (that commit only appended to what it replayed);
//! the write that persists it is the sticky write, which the store refuses if anything moved the
//! run since. Otherwise it is dropped and its result held again, ahead of any later one.
//!
//! Its early steps may then have left for nothing, and they were computed from a result whose
//! step the dropped commit was to record. This is the case `drive::replays_alike` answers, as
//! long as that result is the one applied to the step: the run's next turn then makes the same
//! step and the same steps after it. So the run's next turn takes the held result before any
//! other: a refused write's own result is recorded and the run, if suspended, claimed for that
//! turn with the run still listed (see `drive::spawn_turns`); a turn takes what is held before
//! it waits; and held results are applied in order once the run's turns are over.
//!
//! What this does not cover is a turn that never comes: a store that fails the record too, or
//! a run another turn moved meanwhile. Then the held result takes the ordinary path, which
//! gives it up within about a second and a half if its step is still not on record, and a step
//! sent ahead whose result comes back after another turn made a step at its position (after a
//! lease expiry, a redispatch or a restart) would be applied to that step. That is the hazard
//! every step sent before its commit already carries; a dispatch id that our workers echo would
//! close it (see bench/README.md, session 16).

use std::future::Future;
use std::sync::Arc;

use super::drive::{self, Planned, TurnEnd};
use super::shared::Shared;
use super::sticky::with_result;
use crate::model::{Run, RunId, StepOutcome, StepResult};
use crate::store::History;

/// Awaits `write`, the commit of a turn of `run` that leaves it suspended with `projected`
/// history (`None` if it does not). A result of the run held meanwhile (see
/// [`super::turning`]) is turned ahead on `projected`: the turn it leads to is returned, its
/// early steps sent before the write is done.
pub(super) async fn while_writing<T>(
    shared: &Arc<Shared>,
    run: &Run,
    projected: Option<&History>,
    write: impl Future<Output = T>,
) -> (T, Option<Planned>) {
    let Some(projected) = projected else {
        return (write.await, None);
    };
    let Some(arrivals) = shared.turning.arrivals(&run.id) else {
        return (write.await, None);
    };
    tokio::pin!(write);
    loop {
        // Looked at before each wait: the wake-up keeps one permit, not one per result.
        if let Some(result) = shared.turning.take_held(&run.id) {
            // The write goes on meanwhile (a store may only queue it once it is polled).
            let (written, ahead) =
                tokio::join!(&mut write, turn_ahead(shared, run, projected, result));
            return (written, ahead);
        }
        tokio::select! {
            biased;
            written = &mut write => return (written, None),
            () = arrivals.notified() => {}
        }
    }
}

/// Computes the turn of `run` that `result` leads to from `projected`, and sends its early
/// steps. `None` (with the result held again) when it cannot be turned ahead: not a completion,
/// not a step the history waits for, a workflow not turned here, or the engine stopping.
async fn turn_ahead(
    shared: &Arc<Shared>,
    run: &Run,
    projected: &History,
    result: StepResult,
) -> Option<Planned> {
    let local = shared
        .registry
        .get(&run.workflow, run.workflow_version)
        .is_some();
    let completed = matches!(result.outcome, StepOutcome::Completed { .. });
    let history = if local && completed && shared.is_accepting() {
        with_result(projected.clone(), &result, shared.clock.now())
    } else {
        None
    };
    let Some(history) = history else {
        hold_again(shared, result);
        return None;
    };
    let mut planned = drive::compute(shared, run, history, Some(result)).await;
    planned.send_early(shared, &run.id).await;
    Some(planned)
}

/// What follows a commit of run `id` that `end`ed so, with the turn computed `ahead` of it, if
/// any: that turn, on the run as the commit left it, if the commit parked the run suspended
/// (then with the history the turn was computed on, as the commit only appended to what it
/// replayed); otherwise `end`, and the turn is dropped.
pub(super) fn after_commit(
    shared: &Arc<Shared>,
    id: &RunId,
    end: TurnEnd,
    ahead: Option<Planned>,
) -> TurnEnd {
    match (end, ahead) {
        (TurnEnd::Parked(run), Some(ahead)) => {
            // The run moves on: its cached entry would be stale.
            shared.sticky.take(id);
            TurnEnd::Ahead(Box::new((*run, ahead)))
        }
        (end, Some(ahead)) => {
            abandon(shared, ahead);
            end
        }
        (end, None) => end,
    }
}

/// Drops a turn computed ahead; its result is applied the ordinary way once the run's turn is
/// over.
pub(super) fn abandon(shared: &Arc<Shared>, ahead: Planned) {
    if let Some(result) = ahead.into_result() {
        hold_again(shared, result);
    }
}

/// Holds `result` for its run again, ahead of any result that arrived after it; applies it
/// now if the run's turn is over.
fn hold_again(shared: &Arc<Shared>, result: StepResult) {
    if let Some(result) = shared.turning.hold_again(result) {
        super::results::apply_later(shared, vec![result]);
    }
}
