//! Recording a remote step's result, once, and waking (or claiming) its run.
//!
//! One rule, two dialects: a result wakes its run first (a result for a run that ended is
//! dropped; a parked run keeps it for its next turn), a retryable failure schedules the step's
//! next try, anything else resolves the step if it still waits (a late or repeated result
//! changes nothing), and a run claimed for the caller comes with the history its turn replays.
//! Each store supplies the statements ([`ResultStatements`]) in its SQL.

use super::settle::{Settle, schedule_retry};
use super::turn::TurnStatements;
use crate::model::{Checkpoint, CheckpointStatus, Millis, Run, RunStatus, StepOutcome, StepResult};
use crate::store::{Claim, StepApplied, StoreResult};

/// The statements that record a result, in a store's dialect, inside its write transaction.
pub(crate) trait ResultStatements: TurnStatements {
    /// Wakes the result's run, claiming it under `claim` when it is suspended and inside the
    /// claim's scope: the run after it and its `needs_wake` flag (a claim leaves it clear, a
    /// plain wake-up sets it). `None` when the run ended; a parked run keeps the result and
    /// stays parked.
    async fn wake_or_claim(
        &mut self,
        result: &StepResult,
        now: Millis,
        claim: Option<&Claim>,
    ) -> StoreResult<Option<(Run, bool)>>;

    /// Resolves the result's checkpoint if it still waits (pending or running); `None` for a
    /// late or duplicate result.
    async fn record_result(
        &mut self,
        result: &StepResult,
        now: Millis,
    ) -> StoreResult<Option<Checkpoint>>;
}

/// The status, output and error `result` writes on its checkpoint.
pub(crate) fn columns<S: Settle>(
    result: &StepResult,
) -> (CheckpointStatus, Option<S::Json>, Option<S::Json>) {
    match &result.outcome {
        StepOutcome::Completed { output } => {
            (CheckpointStatus::Completed, Some(S::json(output)), None)
        }
        StepOutcome::Failed { error } => (CheckpointStatus::Failed, None, Some(S::json(error))),
    }
}

/// [`crate::store::Store::apply_step_result`] inside a write transaction; `None` means back it
/// out (nothing it wrote may stand: a duplicate result must not wake or claim its run).
pub(crate) async fn apply_step_result<S: ResultStatements>(
    s: &mut S,
    result: &StepResult,
    now: Millis,
    claim: Option<&Claim>,
) -> StoreResult<Option<StepApplied>> {
    let Some((run, needs_wake)) = s.wake_or_claim(result, now, claim).await? else {
        return Ok(None);
    };
    let checkpoint = match &result.outcome {
        StepOutcome::Failed { error } => match schedule_retry(s, result, error, now).await? {
            Some(cp) => Some(cp),
            None => s.record_result(result, now).await?,
        },
        StepOutcome::Completed { .. } => s.record_result(result, now).await?,
    };
    let Some(checkpoint) = checkpoint else {
        // Duplicate or unknown step: roll the wake-up (and any claim) back.
        return Ok(None);
    };
    let claimed = match claimed(claim, &run, needs_wake) {
        true => Some(s.history(&result.run_id).await?),
        false => None,
    };
    Ok(Some(StepApplied {
        run,
        claimed,
        checkpoint,
    }))
}

/// Whether the wake-up claimed `run` for the caller: it is `running` under `claim`'s owner with
/// `needs_wake` clear (a plain wake-up of a running run sets it).
fn claimed(claim: Option<&Claim>, run: &Run, needs_wake: bool) -> bool {
    claim.is_some_and(|c| {
        !needs_wake && run.status == RunStatus::Running && run.locked_by.as_ref() == Some(&c.owner)
    })
}
