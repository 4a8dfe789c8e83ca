//! One turn: replay a workflow against its history until it returns or blocks on durable
//! operations. A turn is a pure function of (registered code, run history) → [`Decision`], so
//! it can run in the control plane or on a remote worker.

use std::future::{Future, poll_fn};
use std::panic::AssertUnwindSafe;
use std::pin::pin;
use std::sync::Arc;
use std::task::Poll;

use futures::FutureExt;
use serde_json::Value;

use super::{
    Clock, Command, Decision, DecisionStatus, Handlers, RegisteredWorkflow, WorkflowContext,
    WorkflowError,
};
use crate::model::{BufferedSignal, Checkpoint, Millis, Namespace, RunId, StepFailure};

/// Everything a turn replays against.
#[derive(Clone, Debug)]
pub struct TurnInput {
    /// The run.
    pub run_id: RunId,
    /// Its namespace.
    pub namespace: Namespace,
    /// Its input.
    pub input: Value,
    /// Its checkpoints.
    pub history: Vec<Checkpoint>,
    /// Signals buffered for it and not yet consumed.
    pub signals: Vec<BufferedSignal>,
    /// When the turn starts: timers due by then fire.
    pub now: Millis,
}

/// Replays `workflow` for one run and returns what it decided.
pub async fn run_turn(
    workflow: &RegisteredWorkflow,
    turn: TurnInput,
    clock: Arc<dyn Clock>,
) -> Decision {
    let (ctx, input) = context(turn, clock);
    decide(workflow, &ctx, input).await
}

/// Replays `workflow` for one run without running any local step: the decision, or `None` when
/// the turn reached a local step (it must run as an ordinary turn). Nothing it does reaches
/// outside the process, so a start can compute its run's first turn before the run exists and
/// persist both in one write, and drop the turn if the start is refused.
pub async fn dry_turn(
    workflow: &RegisteredWorkflow,
    turn: TurnInput,
    clock: Arc<dyn Clock>,
) -> Option<Decision> {
    let (ctx, input) = context(turn, clock);
    ctx.state().defer_local = true;
    let decision = decide(workflow, &ctx, input).await;
    let deferred = ctx.state().deferred_local;
    (!deferred).then_some(decision)
}

/// Replays `workflow` for one run as far as its history goes, running no local step and
/// deciding nothing, and returns the query and update handlers its body registered: they answer
/// from the state the history gives. A replay that finds the code changed under the history
/// fails with [`WorkflowError::NonDeterminism`].
pub async fn replay_handlers(
    workflow: &RegisteredWorkflow,
    turn: TurnInput,
    clock: Arc<dyn Clock>,
) -> Result<Handlers, WorkflowError> {
    let (ctx, input) = context(turn, clock);
    ctx.state().defer_local = true;
    // A compensating run's body replays without its compensations, as its turns do.
    ctx.take_compensations();
    let body = AssertUnwindSafe(workflow.call(ctx.clone(), input)).catch_unwind();
    drive_until_blocked(body, &ctx).await;
    let mut st = ctx.state();
    match st.nondeterminism.take() {
        Some(err) => Err(err),
        None => Ok(std::mem::take(&mut st.handlers)),
    }
}

fn context(turn: TurnInput, clock: Arc<dyn Clock>) -> (WorkflowContext, Value) {
    let TurnInput {
        run_id,
        namespace,
        input,
        history,
        signals,
        now,
    } = turn;
    let ctx = WorkflowContext::new(run_id, namespace, history, signals, now, clock);
    (ctx, input)
}

/// Drives the workflow body until it finishes or blocks, and turns where it stopped into a
/// [`Decision`]; a body that failed, or a run cancelled with compensation, compensates.
async fn decide(workflow: &RegisteredWorkflow, ctx: &WorkflowContext, input: Value) -> Decision {
    let cancelled = ctx.compensation_requested();
    let undoing = ctx.take_compensations();
    // Cancelled with compensation, or compensating already: the body is replayed only to
    // learn where it stands, and runs no new local step.
    let compensating = cancelled || !undoing.is_empty();
    if compensating {
        ctx.state().defer_local = true;
    }
    let body = AssertUnwindSafe(workflow.call(ctx.clone(), input)).catch_unwind();
    let finished = drive_until_blocked(body, ctx).await;

    let cause = match &finished {
        _ if ctx.state().nondeterminism.is_some() => None,
        _ if cancelled => Some(compensation::cancelled()),
        Some(Ok(Err(err))) if !matches!(err, WorkflowError::ContinueAsNew(_)) => {
            Some(err.to_failure())
        }
        _ if compensating => Some(compensation::interrupted()),
        _ => None,
    };
    if let Some(cause) = cause {
        let base = undoing
            .iter()
            .map(|cp| cp.seq)
            .min()
            .unwrap_or_else(|| ctx.next_seq());
        let compensates = compensating || ctx.to_undo(base).is_none_or(|undo| !undo.is_empty());
        if compensates {
            {
                let mut st = ctx.state();
                // No new work, from the turn compensating begins in on: a step already out is
                // still retried or timed out, so the steps it would undo settle, and a local
                // step that ran this turn is recorded; nothing else the body asked for is made.
                st.commands.retain(|c| {
                    matches!(
                        c,
                        Command::RetryStep { .. }
                            | Command::StepTimedOut { .. }
                            | Command::RecordStep { .. }
                    )
                });
                st.defer_local = false;
                st.deferred_local = false;
            }
            ctx.resume_compensations(undoing, base);
            return compensation::compensate(ctx, cause).await;
        }
    }

    let awaiting = ctx.state().awaiting;
    let status = match finished {
        Some(Ok(Ok(output))) => DecisionStatus::Completed { output },
        Some(Ok(Err(WorkflowError::ContinueAsNew(input)))) => {
            DecisionStatus::ContinuedAsNew { input }
        }
        Some(Ok(Err(err))) => DecisionStatus::Failed {
            error: err.to_failure(),
        },
        Some(Err(panic)) => DecisionStatus::Failed {
            error: StepFailure::new(format!("the workflow panicked: {}", panic_message(&panic)))
                .with_code("panic")
                .fatal(),
        },
        None if awaiting == 0 => DecisionStatus::Failed {
            error: StepFailure::new(
                "the workflow awaited something that is not a durable operation; \
                 use ctx.step, ctx.local_step or another ctx operation instead",
            )
            .with_code("not_durable")
            .fatal(),
        },
        None => DecisionStatus::Continue,
    };
    decided(ctx, status)
}

/// The turn's decision: `status` with the commands it made, unless the replay found the code
/// changed under the history, which fails the run and makes nothing.
fn decided(ctx: &WorkflowContext, status: DecisionStatus) -> Decision {
    let mut st = ctx.state();
    if let Some(err) = st.nondeterminism.take() {
        return Decision {
            status: DecisionStatus::Failed {
                error: err.to_failure(),
            },
            commands: Vec::new(),
            next_wake: None,
        };
    }
    Decision {
        status,
        commands: std::mem::take(&mut st.commands),
        next_wake: st.next_wake,
    }
}

/// Polls `body` until it finishes (`Some`) or every branch waits on a durable operation while no
/// local step is running (`None`).
async fn drive_until_blocked<F: Future>(body: F, ctx: &WorkflowContext) -> Option<F::Output> {
    let mut body = pin!(body);
    poll_fn(|cx| match body.as_mut().poll(cx) {
        Poll::Ready(out) => Poll::Ready(Some(out)),
        Poll::Pending if ctx.state().local_in_flight == 0 => Poll::Ready(None),
        Poll::Pending => Poll::Pending,
    })
    .await
}

fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_owned()
    }
}

mod compensation;
#[cfg(test)]
mod tests;
