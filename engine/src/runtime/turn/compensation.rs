//! A saga's second half: once a workflow failed, or was cancelled with compensation, the
//! undoing steps its completed steps registered run newest first, one at a time, each an
//! ordinary durable step (retried by the default policy) whose checkpoint names the step it
//! undoes.
//!
//! The compensations take the positions from the first one free when compensating begins.
//! From then on the body is replayed without them and starts nothing new (its new operations
//! are dropped), so those positions stay theirs whatever the body does. They start once no
//! step that would be undone is still out, so the list of steps to undo never changes under
//! them.

use serde_json::Value;

use super::super::{Decision, DecisionStatus, StepError, StepOptions, WorkflowContext};
use super::{decided, drive_until_blocked};
use crate::model::{Saga, StepFailure};

/// What a cancel with compensation fails its run with.
pub(super) fn cancelled() -> StepFailure {
    StepFailure::new("cancelled by request, with compensation").with_code("cancelled")
}

/// What a run compensating already fails with when its body, replayed, no longer fails (code
/// changed under it): the compensation carries on.
pub(super) fn interrupted() -> StepFailure {
    StepFailure::new("the run was compensating; its compensations carried on")
        .with_code("compensating")
}

/// The decision of a turn whose body failed with `cause` (or was cancelled: its new work was
/// dropped) and that compensates now, its compensations from the next position on.
pub(super) async fn compensate(ctx: &WorkflowContext, cause: StepFailure) -> Decision {
    let base = ctx.next_seq();
    let Some(undo) = ctx.to_undo(base) else {
        return decided(ctx, DecisionStatus::Continue);
    };
    let steps = async {
        for (seq, step, input) in undo {
            let options = StepOptions {
                saga: Some(Saga::Undoes(seq)),
                ..StepOptions::default()
            };
            let undone: Result<Value, StepError> = ctx.step_with(&step, &input, options).await;
            if let Err(e) = undone {
                return Err(StepFailure::new(format!(
                    "compensation `{step}` of the step at position {seq} failed: {}",
                    e.failure().message
                ))
                .with_code("compensation_failed"));
            }
        }
        Ok(())
    };
    let status = match drive_until_blocked(steps, ctx).await {
        None => DecisionStatus::Continue,
        Some(Ok(())) => DecisionStatus::Compensated { error: cause },
        Some(Err(error)) => DecisionStatus::CompensationFailed { error },
    };
    decided(ctx, status)
}
