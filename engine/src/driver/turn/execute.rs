//! Executing a turn: replaying the run's workflow code (here, or on a worker that announces it,
//! see [`super::remote`]) on its history, making the decision a commit
//! ([`super::commit`]) and screening what it sends ([`super::persist::prepare`]). Nothing is
//! written here; the result is a [`Prepared`] turn for [`super::persist`].

use super::commit::commit_of;
use super::persist::{Prepared, prepare};
use crate::driver::definitions::TenantDefinitions;
use crate::driver::state::State;
use crate::metrics;
use crate::model::{CheckpointKind, Interval, Millis, Run, StepFailure, StepResult};
use crate::runtime::turn::{TurnInput, run_turn};
use crate::runtime::{Decision, DecisionStatus};
use crate::store::{History, TurnCommit};

/// Computes a turn of `run` replaying `history`, with `with_result` (already applied to
/// `history`) to persist along, and screens what it sends.
pub(crate) async fn compute(
    state: &State,
    run: &Run,
    history: History,
    with_result: Option<StepResult>,
) -> Prepared {
    let began = std::time::Instant::now();
    // What the turn replays; after a commit that only appends, the history it suspends with is
    // this plus the new checkpoints, and the store does not read it back.
    let replayed = history.clone();
    // The step whose result this turn persists (a sticky turn), as it is recorded.
    let finished_step = with_result.as_ref().and_then(|result| {
        replayed
            .checkpoints
            .iter()
            .find(|c| c.seq == result.seq)
            .map(metrics::StepTimes::from)
    });
    let now = state.clock.now();
    let plan = state.plans.current(&*state.store).await.of(&run.namespace);
    let limits = &state.config.limits;
    let decided = match state.registry.get(&run.workflow, run.workflow_version) {
        // Past its timeout: it fails, whatever its code would do next.
        _ if let Some(deadline) = run.deadline_at.filter(|at| *at <= now) => Ok(Decision {
            status: DecisionStatus::Failed {
                error: timed_out(run, deadline),
            },
            commands: Vec::new(),
            next_wake: None,
        }),
        // Not here: a worker announcing it on the run's partition turns it, or it parks.
        None => super::remote::turn(state, run, history, now).await,
        Some(workflow) => {
            let History {
                checkpoints,
                signals,
            } = history;
            let input = TurnInput {
                run_id: run.id.clone(),
                namespace: run.namespace.clone(),
                input: run.input.clone(),
                history: checkpoints,
                signals,
                now,
            };
            Ok(run_turn(workflow, input, state.clock.clone()).await)
        }
    };
    let (commit, outgoing) = match decided {
        Ok(decision) => {
            let definitions = definitions_for(state, run, &decision).await;
            commit_of(
                run,
                decision,
                now,
                &state.registry,
                &plan,
                limits,
                definitions.as_deref(),
            )
        }
        Err(block) => (TurnCommit::new(block), Vec::new()),
    };
    let alike = replays_alike(&replayed, &commit);
    let (commit, mut after) = prepare(state, run, replayed, commit, outgoing, now).await;
    let early = if state.alone() && alike {
        after.take_new_steps(&commit)
    } else {
        Vec::new()
    };
    metrics::turn_computed(&run.namespace, &run.workflow, began.elapsed());
    Prepared {
        with_result,
        finished_step,
        commit,
        after,
        early,
    }
}

/// The failure of `run`, whose timeout passed at `deadline`.
fn timed_out(run: &Run, deadline: Millis) -> StepFailure {
    let took = Interval::from_millis(deadline.saturating_sub(run.created_at).max(0));
    StepFailure::new(format!(
        "the run outlived its timeout of {took}; start it with a longer one, or retry it (a retried run has none)"
    ))
    .with_code("run_timeout")
    .fatal()
}

/// Whether a turn that replayed `replayed` and makes `commit` would make it again if it had to
/// be computed anew, later: only then may its steps leave before it commits.
///
/// A step that leaves early is on nobody's record until the commit lands. If the commit is
/// refused (the run was woken or moved meanwhile), the run's next turn replays the history
/// again, and its steps are sent again. A step result names its run and position only (wire
/// §2.2), so the early step's result is applied to whatever step that next turn puts at the
/// same position. That is the same step only if the next turn takes the same path:
///
/// - Nothing it replays may have changed. A timer that came due, a signal that arrived, a child
///   that ended or another step's result would each be seen by the next turn and could send the
///   workflow down another branch (a step racing a timeout, say). So everything the turn
///   replayed must be resolved.
/// - Nothing the turn records may differ when run again. A local step or a side effect (`now()`
///   included) would run again and return something else, and a new timer or signal wait could
///   be resolved by then. So the turn may add remote steps only.
pub(crate) fn replays_alike(replayed: &History, commit: &TurnCommit) -> bool {
    replayed.checkpoints.iter().all(|c| c.status.is_resolved())
        && commit
            .checkpoints
            .iter()
            .all(|c| c.kind == CheckpointKind::RemoteStep)
}

/// Computes the turn that `result` (already applied to `history`) leads to, while the commit of
/// the run's previous turn is in flight, and sends its early steps at once (see
/// [`crate::driver::fast_path::ahead`]).
pub(crate) async fn compute_ahead(
    state: &State,
    run: &Run,
    history: History,
    result: StepResult,
) -> Prepared {
    let mut prepared = compute(state, run, history, Some(result)).await;
    prepared.send_early(state, &run.id).await;
    prepared
}

/// The definitions of `run`'s tenant when `decision` names one of its pools (see
/// [`crate::driver::definitions`]); `None` when none is named, or when the store cannot say
/// (the call is then sent to the pool it names, as if it existed).
pub(super) async fn definitions_for(
    state: &State,
    run: &Run,
    decision: &Decision,
) -> Option<std::sync::Arc<TenantDefinitions>> {
    match state
        .definitions
        .for_decision(&*state.store, &run.namespace, decision)
        .await
    {
        Ok(definitions) => definitions,
        Err(e) => {
            tracing::warn!(error = %e, run_id = %run.id, "could not read the tenant's pools; a step naming one is sent to it unchecked");
            None
        }
    }
}
