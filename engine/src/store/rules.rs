//! Semantics every backend shares, kept in one place so the stores cannot drift apart: which
//! child endings settle a parent, where a child's wait sits in its parent, and the failures the
//! store itself records.

use serde_json::Value;

use super::{TurnCommit, TurnOutcome};
use crate::model::{Millis, RunId, RunStatus, StepFailure};

/// Whether a child ending in `status` settles its parent's wait: every terminal status but
/// `continued`, whose successor settles it instead.
pub(crate) fn settles_parent(status: RunStatus) -> bool {
    status.is_terminal() && status != RunStatus::Continued
}

/// The position of the parent's wait on child `id`: `<parent>.child.<seq>`, or
/// `<parent>.child.<seq>:c<n>` for its ContinueAsNew successors. `None` for a top-level run.
pub(crate) fn child_seq(id: &RunId) -> Option<i64> {
    id.as_str()
        .rsplit_once(".child.")
        .and_then(|(_, s)| s.split(':').next())
        .and_then(|s| s.parse::<i64>().ok())
}

/// The error of a run given up after `max_recoveries` driver deaths.
pub(crate) fn dead(max_recoveries: u32) -> StepFailure {
    StepFailure::new(format!(
        "the run's driver stopped {max_recoveries} times while running it; it was given up as dead \
         (retry it once the cause is fixed)"
    ))
    .with_code("dead")
}

/// The error of a child cancelled because a sibling failed under fail-fast.
pub(crate) fn sibling_failed(parent: &RunId) -> StepFailure {
    StepFailure::new(format!("cancelled: a sibling under run {parent} failed"))
        .with_code("cancelled")
}

/// The error of a signal wait whose timeout passed.
pub(crate) fn signal_timed_out() -> StepFailure {
    StepFailure::new("the signal wait timed out").with_code("timeout")
}

/// The error of a step try that outlived its timeout.
pub(crate) fn step_timed_out(seq: u32) -> StepFailure {
    StepFailure::new(format!(
        "step try timed out (no result within its timeout); seq {seq}"
    ))
    .with_code("timeout")
}

/// The failure a parent's wait records for a child that ended `status` without an error.
pub(crate) fn child_ended(child: &RunId, status: RunStatus) -> StepFailure {
    StepFailure::new(format!("child run {child} ended {status}"))
}

/// What a turn's outcome writes on its run: the next status (before the stay-running rule), the
/// output or error, the timer to wake for, and the end time.
pub(crate) struct RunUpdate {
    pub status: RunStatus,
    pub output: Option<Value>,
    pub error: Option<StepFailure>,
    pub wake_at: Option<Millis>,
    pub finished_at: Option<Millis>,
}

/// A new run's row after its first turn, `commit`, at `now`, and whether the run stays claimed:
/// [`run_update`] with the stay-running rule every store's turn update applies (a run that
/// would suspend but whose timer is already due, or one of whose steps timed out, stays
/// `running` under the lease, claimed once more). A new run was never woken otherwise.
pub(crate) fn first_turn_row(commit: &TurnCommit, now: Millis) -> (RunUpdate, bool) {
    let mut row = run_update(&commit.outcome, now);
    let woken = row.status == RunStatus::Suspended
        && (!commit.timed_out_steps.is_empty() || row.wake_at.is_some_and(|at| at <= now));
    if woken {
        row.status = RunStatus::Running;
        row.wake_at = None;
    }
    (row, woken)
}

/// The run row a turn ending in `outcome` at `now` leaves behind.
pub(crate) fn run_update(outcome: &TurnOutcome, now: Millis) -> RunUpdate {
    let update = |status, output, error, wake_at, finished_at| RunUpdate {
        status,
        output,
        error,
        wake_at,
        finished_at,
    };
    match outcome {
        TurnOutcome::Suspend { wake_at } => {
            update(RunStatus::Suspended, None, None, *wake_at, None)
        }
        TurnOutcome::Complete(out) => update(
            RunStatus::Completed,
            Some(out.clone()),
            None,
            None,
            Some(now),
        ),
        TurnOutcome::Fail(err) => {
            update(RunStatus::Failed, None, Some(err.clone()), None, Some(now))
        }
        TurnOutcome::Block { reason, recheck_at } => update(
            RunStatus::Blocked,
            None,
            Some(reason.clone()),
            *recheck_at,
            None,
        ),
        TurnOutcome::Continue(next) => update(
            RunStatus::Continued,
            Some(serde_json::json!({ "continuedAs": next.id })),
            None,
            None,
            Some(now),
        ),
    }
}
