//! The redispatch loop: a remote step whose dispatch may be lost is sent again with the same
//! `step_id` (delivery is at-least-once).
//!
//! What counts as lost depends on where the transport keeps its tasks. One that keeps them
//! (Redis) can still lose one (a worker that took it died), so any step with no result after
//! `redispatch_after` is sent again. One that keeps them in the sender's memory (in-process)
//! loses exactly the tasks of a driver that is gone, and nothing else: those are sent again as
//! soon as that driver's heartbeat lapses, and a live peer's tasks are left alone, or a second
//! process on the same database would run them twice.

use std::sync::Arc;

use tokio::sync::watch;

use crate::driver::state::State;
use crate::model::{Checkpoint, Millis, Namespace, RemoteTask, step_id};
use crate::store::{LostDispatch, StoreError};
use crate::transport::naming::routing_token;

const BATCH: u32 = 500;

pub(crate) async fn redispatch_loop(state: Arc<State>, mut stop: watch::Receiver<bool>) {
    let mut every = state.config.redispatch_after / 2;
    if !state.transport.retains_tasks() {
        // A gone peer's tasks are found within about a lease of its death.
        every = every.min(state.config.lease / 2);
    }
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            // Engine time: a step's redispatch window and a dead driver's heartbeat lapse on
            // the engine's clock; wall time: a peer that stopped is found by looking again.
            () = state.pace(every) => {}
        }
        if let Err(e) = redispatch_due(&state).await {
            tracing::warn!(error = %e, "redispatching lost steps failed; retrying next round");
        }
    }
}

/// Which waiting steps may be lost now, for this engine's transport (see the module docs).
fn lost_now(state: &State) -> LostDispatch {
    let now = state.clock.now();
    let sent_before = now - state.config.redispatch_after.as_millis() as Millis;
    if state.transport.retains_tasks() {
        LostDispatch::sent_before(sent_before)
    } else {
        LostDispatch {
            sent_before,
            only_sent_by: Some(state.config.owner.clone()),
            senders_gone_at: Some(now),
        }
    }
}

/// Marks remote step `cp` of a run in `namespace` dispatched at `stamp` and queues it again
/// with its `step_id`, so a worker that already ran it can tell.
pub(crate) async fn send_again(
    state: &State,
    namespace: &Namespace,
    cp: Checkpoint,
    stamp: Millis,
) -> Result<(), StoreError> {
    let task = RemoteTask {
        step_id: step_id(&cp.run_id, cp.seq),
        group: cp
            .worker_group
            .clone()
            .unwrap_or_else(|| routing_token(&cp.name, Some(namespace))),
        run_id: cp.run_id.clone(),
        seq: cp.seq,
        name: cp.name,
        input: cp.input,
        context: Some(serde_json::json!({ "tenant": namespace })),
        traceparent: None,
        attempt: cp.attempts.max(1),
        reply_to: None,
        priority: cp.priority,
        receipt: Default::default(),
    };
    state
        .store
        .mark_dispatched(&cp.run_id, cp.seq, &state.config.owner, stamp)
        .await?;
    if let Err(e) = state.transport.dispatch(task).await {
        tracing::warn!(run_id = %cp.run_id, seq = cp.seq, error = %e, "redispatch failed");
    }
    Ok(())
}

/// Dispatches again every waiting remote step in scope whose dispatch may be lost.
pub(crate) async fn redispatch_due(state: &State) -> Result<usize, StoreError> {
    let lost = lost_now(state);
    let mut total = 0;
    loop {
        let steps = state
            .store
            .pending_remote_steps(&state.scope, &lost, BATCH)
            .await?;
        let n = steps.len();
        for step in steps {
            // Stamp strictly after the cutoff, and as sent by this live driver, so the next
            // batch does not fetch this step again.
            let stamp = state.clock.now().max(lost.sent_before + 1);
            send_again(state, &step.namespace, step.checkpoint, stamp).await?;
        }
        total += n;
        if n < BATCH as usize {
            if total > 0 {
                tracing::info!(steps = total, "redispatched remote steps with no result");
            }
            return Ok(total);
        }
    }
}
