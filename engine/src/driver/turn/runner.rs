//! The turn runner: executes a claimed run's turns one after the other, in a task of their own
//! holding one turn slot, until the run stops being runnable. Each turn is computed
//! ([`super::execute`]) and persisted ([`super::persist`]); what the persist says comes next (the
//! run woken meanwhile, a turn computed ahead of the commit, a refused sticky write) decides
//! whether another turn follows here.

use std::sync::Arc;

use tracing::Instrument;

use super::execute::{compute, compute_ahead};
use super::persist::{Prepared, TurnEnd, persist_turn};
use super::record::{Recorded, record_claiming};
use crate::driver::state::State;
use crate::fair::Slot;
use crate::model::{Namespace, Run, RunId, StepResult, TenantEventKind, parked_by_guard};
use crate::store::{History, StoreError};
use crate::trace_context;

/// How the first turn of [`spawn_turns`] starts.
pub(crate) enum FirstTurn {
    /// The run is claimed; replay this history (read it when `None`).
    Claimed(Option<History>),
    /// The sticky fast path: the run is suspended as this engine left it; replay the cached
    /// history with `result` applied and persist both in one write. If the store refuses (the
    /// run changed meanwhile) or fails, `result` is applied the ordinary way.
    Sticky(History, StepResult),
    /// Computed while the commit before it was in flight (see [`crate::driver::fast_path::ahead`]); the run is as
    /// that commit left it.
    Ahead(Box<Prepared>),
}

/// Executes turns of `run` until it stops being runnable: a run woken while its turn executed
/// stays claimed and turns again at once, a turn computed ahead of its commit follows it (see
/// [`crate::driver::fast_path::ahead`]), and a refused sticky write's result is recorded with the run (if
/// suspended) claimed for its next turn here. `slot` is held throughout, so shutdown can wait
/// for it.
pub(crate) fn spawn_turns(state: Arc<State>, run: Run, first: FirstTurn, slot: Slot) {
    // Listed before the task starts, so a result of the run that arrives meanwhile is held.
    let id = run.id.clone();
    state.in_flight.begin(&id);
    let span = run_span(
        &run.namespace,
        &run.id,
        &run.workflow,
        run.traceparent.as_deref(),
    );
    let turns = async move {
        let (mut run, mut next) = match first {
            FirstTurn::Claimed(history) => {
                // A parked run's recheck is not news unless it moves on.
                if !run.error.as_ref().is_some_and(parked_by_guard) {
                    state.emit(&run, TenantEventKind::RunRunning, None);
                }
                (run, Persist::Turn(history))
            }
            // Never `running` in the store: the run moves on from `suspended` in one write.
            FirstTurn::Sticky(history, result) => (run, Persist::WithResult(history, result)),
            FirstTurn::Ahead(prepared) => (run, Persist::Ahead(prepared)),
        };
        loop {
            match turn(&state, &run, next).await {
                // Shutting down: the lease is released and a restart resumes the run.
                Ok(TurnEnd::Again(again)) if state.is_accepting() => {
                    let (again, history) = *again;
                    run = again;
                    next = Persist::Turn(Some(history));
                }
                // Persisted even when shutting down: its steps left already, and its slot is
                // still held (no further turn is computed ahead then).
                Ok(TurnEnd::Ahead(ahead)) => {
                    let (now, prepared) = *ahead;
                    run = now;
                    next = Persist::Ahead(Box::new(prepared));
                }
                // The result is recorded the ordinary way and, if the run is suspended, it is
                // claimed for its next turn here with the run still listed: a result held
                // meanwhile (one a turn computed ahead took, say) is applied by that turn before
                // any result that arrives later, so steps sent ahead of the refused write stay
                // consistent with what is recorded. Claimed during shutdown too, as this slot
                // is still held.
                Ok(TurnEnd::Refused(result)) => {
                    match record_claiming(&state, *result, true, Some(&run)).await {
                        Recorded::Claimed(claimed) => {
                            let (again, history) = *claimed;
                            if !again.error.as_ref().is_some_and(parked_by_guard) {
                                state.emit(&again, TenantEventKind::RunRunning, None);
                            }
                            run = again;
                            next = Persist::Turn(Some(history));
                        }
                        Recorded::Unapplied(late) => {
                            tracing::debug!(run_id = %late.run_id, seq = late.seq, "ignored a late or duplicate step result");
                            break;
                        }
                        Recorded::Applied(_) | Recorded::Failed(_) => break,
                    }
                }
                Ok(_) => break,
                Err(e) => {
                    tracing::warn!(run_id = %id, error = %e, "turn failed; the run is retried when its lease expires");
                    break;
                }
            }
        }
        // The run is parked now (if it suspended), so held results take the sticky path. They
        // are queued before the slot is released: the results loop, stopping, waits for every
        // slot and then applies what is queued.
        state.requeue(state.in_flight.end(&id));
        drop(slot);
    };
    tokio::spawn(turns.instrument(span));
}

/// The span a run's turns run in: every log line of the run's turns, its workflow code and
/// its local steps included, carries its tenant, id and workflow. It continues the run's trace
/// (`traceparent`, its start's), wherever and whenever the turns run.
pub(crate) fn run_span(
    tenant: &Namespace,
    id: &RunId,
    workflow: &str,
    traceparent: Option<&str>,
) -> tracing::Span {
    trace_context::span_in_trace!(
        traceparent,
        "run",
        tenant = %tenant,
        run_id = %id,
        workflow = %workflow
    )
}

/// What a turn replays and how it is persisted.
enum Persist {
    /// An ordinary turn of a claimed run (history read here when `None`).
    Turn(Option<History>),
    /// A sticky turn: history with `result` applied, persisted together with it.
    WithResult(History, StepResult),
    /// A turn computed while the run's previous commit was in flight (see [`crate::driver::fast_path::ahead`]).
    Ahead(Box<Prepared>),
}

/// Executes one turn of `run` and persists it.
async fn turn(state: &Arc<State>, run: &Run, persist: Persist) -> Result<TurnEnd, StoreError> {
    let prepared = match persist {
        Persist::Turn(Some(history)) => compute(state, run, history, None).await,
        Persist::Turn(None) => {
            let history = History {
                checkpoints: state.store.checkpoints(&state.scope, &run.id).await?,
                signals: state.store.buffered_signals(&run.id).await?,
            };
            compute(state, run, history, None).await
        }
        Persist::WithResult(history, result) => compute(state, run, history, Some(result)).await,
        Persist::Ahead(prepared) => *prepared,
    };
    // A result that arrives while the commit is in flight is turned at once, on the history the
    // commit leaves (see `fast_path::ahead`).
    let ahead = async |history, result| compute_ahead(state, run, history, result).await;
    persist_turn(state, run, prepared, ahead).await
}
