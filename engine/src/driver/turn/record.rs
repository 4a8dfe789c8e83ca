//! Recording a step result the ordinary way: one write that completes (or fails, or schedules
//! the retry of) its checkpoint and wakes its run, claiming it for a turn here when the caller
//! holds a slot. A step that held a concurrency slot gives it back once its result is recorded.
//! The results loop takes this path when the sticky one declines, and the turn runner when the
//! store refuses a sticky write.

use super::flow;
use crate::driver::state::State;
use crate::fair::{self, Lane};
use crate::model::{CheckpointStatus, Namespace, Run, StepResult, TenantEventKind};
use crate::store::History;

/// What [`record_claiming`] did.
pub(crate) enum Recorded {
    /// Applied, and its run claimed here for a turn, which replays this history.
    Claimed(Box<(Run, History)>),
    /// Applied; the run (of this tenant) is not claimed here.
    Applied(Namespace),
    /// No checkpoint accepted it (it is late or a duplicate, or its step is not on record).
    Unapplied(StepResult),
    /// The store failed (logged). The result is handed back, given back: once dropped, the
    /// broker queues it again for any control plane.
    Failed(StepResult),
}

/// Records a step result in the store and, if `claim`, claims its run for a turn here in the
/// same write (the caller holds a turn slot for it). `of` is the result's run when this engine
/// knows it: the write then waits its turn in the run's tenant's lane, and otherwise in the
/// system lane (a result names only its run, and reading the run first would cost a query).
pub(crate) async fn record_claiming(
    state: &State,
    result: StepResult,
    claim: bool,
    of: Option<&Run>,
) -> Recorded {
    let claim = claim.then(|| state.claim());
    let lane = match of {
        Some(run) => state.lane(&run.namespace, &run.workflow),
        None => Lane::system(),
    };
    let apply = state
        .store
        .apply_step_result(&result, state.clock.now(), claim.as_ref());
    match fair::within(lane, apply).await {
        Ok(Some(applied)) => {
            let kind = if applied.checkpoint.status == CheckpointStatus::Completed {
                TenantEventKind::StepCompleted
            } else {
                TenantEventKind::StepFailed
            };
            state.emit(&applied.run, kind, Some(applied.checkpoint.seq));
            state.step_finished(&applied.run.namespace, &(&applied.checkpoint).into());
            if let Some(counter) = &applied.checkpoint.slot {
                let (run, seq) = (&applied.run, applied.checkpoint.seq);
                flow::release(state, &run.namespace, counter, &run.id, seq).await;
            }
            match applied.claimed {
                Some(history) => Recorded::Claimed(Box::new((applied.run, history))),
                None => Recorded::Applied(applied.run.namespace),
            }
        }
        Ok(None) => Recorded::Unapplied(result),
        Err(e) => {
            tracing::warn!(run_id = %result.run_id, seq = result.seq, error = %e, "could not record a step result; it goes back to the broker");
            result.receipt.give_back();
            Recorded::Failed(result)
        }
    }
}
