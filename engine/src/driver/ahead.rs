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
//! The turn computed ahead is followed only if the commit before it left the run suspended
//! with exactly the history it was computed on; the write that persists it is the sticky write,
//! which the store refuses if anything moved the run since. Otherwise it is dropped and its
//! result is applied the ordinary way, after the commit. Its early steps may then have left for
//! nothing, which is the case `drive::replays_alike` already answers: they were computed from
//! resolved history only, and the result they followed is applied unchanged, so the run's next
//! turn makes the same steps at the same positions.

use std::future::Future;
use std::sync::Arc;

use super::drive::{self, Planned, TurnEnd};
use super::shared::Shared;
use super::sticky::with_result;
use crate::model::{Run, RunId, StepOutcome, StepResult};
use crate::store::History;

/// A turn computed while the commit before it was in flight, its early steps sent.
pub(super) struct Ahead {
    /// The history that commit was to leave, which the turn was computed on.
    projected: History,
    planned: Planned,
}

/// Awaits `write`, the commit of a turn of `run` that leaves it suspended with `projected`
/// history (`None` if it does not). A result of the run held meanwhile (see
/// [`super::turning`]) is turned ahead on `projected`, and its turn's early steps leave before
/// the write is done.
pub(super) async fn while_writing<T>(
    shared: &Arc<Shared>,
    run: &Run,
    projected: Option<History>,
    write: impl Future<Output = T>,
) -> (T, Option<Ahead>) {
    let arrivals = shared.turning.arrivals(&run.id);
    let (Some(projected), Some(arrivals)) = (projected, arrivals) else {
        return (write.await, None);
    };
    tokio::pin!(write);
    loop {
        tokio::select! {
            biased;
            written = &mut write => return (written, None),
            () = arrivals.notified() => {
                let Some(result) = shared.turning.take_held(&run.id) else {
                    continue;
                };
                let ahead = turn_ahead(shared, run, projected, result).await;
                return (write.await, ahead);
            }
        }
    }
}

/// Computes the turn of `run` that `result` leads to from `projected`, and sends its early
/// steps. `None` (with the result held again) when it cannot be turned ahead: not a completion,
/// not a step the history waits for, or a workflow not turned here.
async fn turn_ahead(
    shared: &Arc<Shared>,
    run: &Run,
    projected: History,
    result: StepResult,
) -> Option<Ahead> {
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
    // With the history given and the workflow registered here, nothing is read from the store.
    match drive::compute(shared, run, Some(history), Some(result.clone())).await {
        Ok(mut planned) => {
            planned.send_early(shared, &run.id).await;
            Some(Ahead { projected, planned })
        }
        Err(e) => {
            tracing::debug!(run_id = %run.id, error = %e, "could not turn a result ahead");
            hold_again(shared, result);
            None
        }
    }
}

/// What follows a commit that `end`ed so, with the turn computed `ahead` of it, if any: that
/// turn, if the commit left the run as it was computed on (see [`Ahead::follow`]); otherwise
/// `end`, and the turn is dropped.
pub(super) fn then(
    shared: &Arc<Shared>,
    id: &RunId,
    end: TurnEnd,
    ahead: Option<Ahead>,
) -> TurnEnd {
    match (end, ahead) {
        (TurnEnd::Done, Some(ahead)) => ahead.follow(shared, id),
        (end, Some(ahead)) => {
            ahead.abandon(shared);
            end
        }
        (end, None) => end,
    }
}

impl Ahead {
    /// The turn to persist next, now that the commit before it landed: on the run as that
    /// commit left it, if it left it suspended with the history the turn was computed on.
    fn follow(self, shared: &Arc<Shared>, id: &RunId) -> TurnEnd {
        match shared.sticky.take(id) {
            Some(parked) if same_history(&parked.history, &self.projected) => {
                TurnEnd::Ahead(Box::new((parked.run, self.planned)))
            }
            parked => {
                if let Some(parked) = parked {
                    shared.sticky.park(parked.run, parked.history);
                }
                self.abandon(shared);
                TurnEnd::Done
            }
        }
    }

    /// Drops the turn; its result is applied the ordinary way once the run's turn is over.
    pub(super) fn abandon(self, shared: &Arc<Shared>) {
        drop_planned(shared, self.planned);
    }
}

/// Drops a turn computed ahead that will not be persisted; its result is applied the ordinary
/// way once the run's turn is over (or now, if that is over already).
pub(super) fn drop_planned(shared: &Arc<Shared>, planned: Planned) {
    if let Some(result) = planned.into_result() {
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

/// Whether two histories hold the same checkpoints in the same states and the same signals.
fn same_history(a: &History, b: &History) -> bool {
    a.signals.len() == b.signals.len()
        && a.checkpoints.len() == b.checkpoints.len()
        && a.checkpoints
            .iter()
            .zip(&b.checkpoints)
            .all(|(x, y)| x.seq == y.seq && x.status == y.status)
}
