//! A start and its run's first turn in one write.
//!
//! A new run has no history, so its first turn can be computed before the run exists, as long
//! as it runs no local step: a start that is then refused (its id exists) must have done
//! nothing. The insert and the turn's commit are one write instead of two, and the run's first
//! step goes out one commit sooner. With an id generated here, which no run can have, the start
//! is never refused, so the first steps leave while that write is in flight (if it fails
//! instead, their results find no run and are dropped, and the caller hears the error).

use std::sync::Arc;
use std::time::Instant;

use super::commit::commit_of;
use super::execute::{compute_ahead, replays_alike};
use super::persist::{TurnEnd, abandon, after_commit, dispatch_early, local_steps, prepare};
use super::runner::{FirstTurn, spawn_turns};
use crate::driver::fast_path::ahead;
use crate::driver::state::State;
use crate::fair::{self, Slot};
use crate::metrics;
use crate::model::{Millis, Run, RunStatus, TenantEventKind};
use crate::runtime::turn::{TurnInput, dry_turn};
use crate::store::{Claim, History, NewRun, StoreError};

/// Where a new run's id comes from.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum IdOrigin {
    /// Generated here: no run has it.
    Generated,
    /// Chosen by the caller (an idempotency key): a run may have it already.
    Chosen,
}

/// How [`with_first_turn`] went.
#[allow(
    clippy::large_enum_variant,
    reason = "returned once per start and unpacked at once, never stored or moved around"
)]
pub(crate) enum Started {
    /// Inserted with its first turn persisted; the run as that turn left it.
    Run(Run),
    /// Nothing was written: start it the ordinary way (insert it, then turn it).
    Undecided(NewRun, Slot),
}

/// Inserts `new` together with its first turn, holding `slot` for the turn. Undecided when the
/// workflow is not registered here (a worker turns it), when this engine may not drive the
/// run's namespace, or when the first turn reaches a local step.
pub(crate) async fn with_first_turn(
    state: &Arc<State>,
    new: NewRun,
    id: IdOrigin,
    slot: Slot,
) -> Result<Started, StoreError> {
    let Some(workflow) = state.registry.get(&new.workflow, new.workflow_version) else {
        return Ok(Started::Undecided(new, slot));
    };
    if !state.scope.admits(&new.namespace) {
        return Ok(Started::Undecided(new, slot));
    }
    let claim = state.claim();
    let now = state.clock.now();
    let input = TurnInput {
        run_id: new.id.clone(),
        namespace: new.namespace.clone(),
        input: new.input.clone(),
        history: Vec::new(),
        signals: Vec::new(),
        now,
    };
    let began = Instant::now();
    let Some(decision) = dry_turn(workflow, input, state.clock.clone()).await else {
        return Ok(Started::Undecided(new, slot));
    };
    let view = claimed(&new, &claim, now);
    let plans = state.plans.current(&*state.store).await;
    let plan = plans.of(&view.namespace);
    let limits = &state.config.limits;
    let definitions = super::execute::definitions_for(state, &view, &decision).await;
    let (commit, outgoing) = commit_of(
        &view,
        decision,
        now,
        &state.registry,
        &plan,
        limits,
        definitions.as_deref(),
    );
    metrics::turn_computed(&new.namespace, &new.workflow, began.elapsed());
    let local_steps = local_steps(&commit);
    let alike = replays_alike(&History::default(), &commit);
    let (commit, mut after) =
        prepare(state, &view, History::default(), commit, outgoing, now).await;
    // A generated id is on no run yet, so the insert is not refused: the first steps may leave
    // while it commits, as a turn's do (see `execute::replays_alike`). A caller's id may be taken,
    // and a refused start must have sent nothing.
    let early = if id == IdOrigin::Generated && state.alone() && alike {
        after.take_new_steps(&commit)
    } else {
        Vec::new()
    };
    // Listed before its steps leave, so a result that beats the insert is held, or turned
    // ahead (see `fast_path::in_flight`). Only then: the id of a start that sends nothing early may
    // be another run's, whose results are not this start's to take.
    let listed = !early.is_empty();
    let projected = if listed {
        state.in_flight.begin(&new.id);
        after.projection()
    } else {
        None
    };
    let write = fair::within(state.lane(&new.namespace, &new.workflow), async {
        let began = Instant::now();
        let created = state
            .store
            .create_run_and_commit(new.clone(), &claim, commit, state.clock.now())
            .await;
        metrics::committed(&new.namespace, began.elapsed());
        created
    });
    let ((created, ahead), ()) = tokio::join!(
        ahead::while_writing(state, &view, projected, write, async |history, result| {
            compute_ahead(state, &view, history, result).await
        }),
        dispatch_early(state, &new.id, early)
    );
    let committed = match created {
        Ok(Some(committed)) => committed,
        refused => {
            if let Some(ahead) = ahead {
                abandon(state, ahead);
            }
            if listed {
                state.requeue(state.in_flight.end(&new.id));
            }
            return refused.map(|_| Started::Undecided(new, slot));
        }
    };
    let run = committed.run.clone();
    for step in &local_steps {
        state.step_finished(&run.namespace, step);
    }
    state.emit(&run, TenantEventKind::RunStarted, None);
    // Its tenant heard of the run as the first turn left it: a run that only suspended is not
    // announced again.
    let end = after.persisted(state, &run, committed).await;
    match after_commit(state, &run.id, end, ahead) {
        // A timer already due: the run stays claimed and turns again at once.
        TurnEnd::Again(again) => {
            let (again, history) = *again;
            let first = FirstTurn::Claimed(Some(history));
            spawn_turns(state.clone(), again, first, slot);
        }
        TurnEnd::Ahead(ahead) => {
            let (now, prepared) = *ahead;
            let first = FirstTurn::Ahead(Box::new(prepared));
            spawn_turns(state.clone(), now, first, slot);
        }
        TurnEnd::Refused(result) => {
            drop(slot);
            state.requeue(vec![*result]);
        }
        TurnEnd::Parked(_) | TurnEnd::Done => drop(slot),
    }
    // After the turns above listed it again: what is held for the run now waits for them.
    if listed {
        state.requeue(state.in_flight.end(&run.id));
    }
    Ok(Started::Run(run))
}

/// `new` as the store inserts it claimed under `claim`: what its first turn is prepared from.
fn claimed(new: &NewRun, claim: &Claim, now: Millis) -> Run {
    Run {
        id: new.id.clone(),
        namespace: new.namespace.clone(),
        workflow: new.workflow.clone(),
        workflow_version: new.workflow_version,
        status: RunStatus::Running,
        input: new.input.clone(),
        output: None,
        error: None,
        tags: new.tags.clone(),
        search_attributes: new.search_attributes.clone(),
        parent_run_id: new.parent_run_id.clone(),
        root_run_id: new.root_run_id.clone(),
        nesting_depth: new.nesting_depth,
        retry_of: new.retry_of.clone(),
        continued_from: new.continued_from.clone(),
        attempt: 1,
        admitted_attempt: 0,
        wake_at: None,
        locked_by: Some(claim.owner.clone()),
        locked_until: Some(claim.until),
        created_at: now,
        updated_at: now,
        finished_at: None,
        concurrency: new.concurrency.clone(),
        deadline_at: new.deadline_at,
        traceparent: new.traceparent.clone(),
    }
}
