//! The redispatch loop: a remote step whose dispatch may be lost is sent again with the same
//! `step_id` (delivery is at-least-once).
//!
//! What counts as lost depends on where the transport keeps its tasks. One that keeps them in
//! the sender's memory (in-process) loses exactly the tasks of a driver that is gone, and
//! nothing else: those are sent again as soon as that driver's heartbeat lapses, and a live
//! peer's tasks are left alone, or a second process on the same database would run them twice.
//!
//! One that keeps them (Redis) is asked about each step with no result after
//! `redispatch_after`. A job still queued or running is left alone: sending it again would only
//! find it there. A job that is gone finished, with its result on the way (a worker adds the
//! result, then finishes the job, and a control plane applies it within moments), or was lost
//! with the broker's data. The two look the same, so a step whose job is gone is sent again
//! only if a look a whole window later finds it still gone and the step still without a
//! result ([`crate::driver::vanished_jobs::VanishedJobs`]): sent at once, it would race its
//! own result and run its step twice.
//! A step never sent (a retry whose turn did not send it) has nothing on the way and goes at
//! once.

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
    let sent_before = now - window(state);
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

/// The redispatch window, in ms.
fn window(state: &State) -> Millis {
    state.config.redispatch_after.as_millis() as Millis
}

/// The task that sends remote step `cp` of a run in `namespace` again, with its `step_id`, so
/// a worker that already ran it can tell.
fn task_of(namespace: &Namespace, cp: Checkpoint) -> RemoteTask {
    RemoteTask {
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
    }
}

/// Marks remote step `cp` of a run in `namespace` dispatched at `stamp` and queues it again.
pub(crate) async fn send_again(
    state: &State,
    namespace: &Namespace,
    cp: Checkpoint,
    stamp: Millis,
) -> Result<(), StoreError> {
    send(state, task_of(namespace, cp), stamp).await
}

async fn send(state: &State, task: RemoteTask, stamp: Millis) -> Result<(), StoreError> {
    state
        .store
        .mark_dispatched(&task.run_id, task.seq, &state.config.owner, stamp)
        .await?;
    let (run_id, seq) = (task.run_id.clone(), task.seq);
    if let Err(e) = state.transport.dispatch(task).await {
        tracing::warn!(run_id = %run_id, seq, error = %e, "redispatch failed");
    }
    Ok(())
}

/// What the redispatch loop does with one waiting step (see the module docs).
enum Verdict {
    /// Its job is still queued or running: look again a window from now.
    Queued,
    /// Its job is gone, first seen so less than a window ago: look again a window from now.
    Vanished,
    /// Send it again.
    Send,
}

/// Looks at `task`'s job on the broker, for a step sent before (`sent`).
async fn look(state: &State, task: &RemoteTask, sent: bool) -> Verdict {
    if !state.transport.retains_tasks() || !sent {
        return Verdict::Send;
    }
    let key = (task.run_id.clone(), task.seq, task.attempt);
    let outstanding = state.transport.task_outstanding(task).await;
    // The look's time is when its answer came, however long Redis took to give it.
    let now = state.clock.now();
    match outstanding {
        Ok(true) => {
            state.vanished.forget(&key);
            Verdict::Queued
        }
        Ok(false) if state.vanished.gone_since(key, now, window(state)) => Verdict::Send,
        Ok(false) => Verdict::Vanished,
        Err(e) => {
            // Unknown: treated as still there, and looked at again next window.
            tracing::warn!(run_id = %task.run_id, seq = task.seq, error = %e, "could not look for a step's job on the broker");
            Verdict::Queued
        }
    }
}

/// Dispatches again every waiting remote step in scope whose dispatch may be lost.
pub(crate) async fn redispatch_due(state: &State) -> Result<usize, StoreError> {
    let lost = lost_now(state);
    state.vanished.prune(state.clock.now(), window(state));
    let (mut total, mut vanished) = (0, 0);
    loop {
        let steps = state
            .store
            .pending_remote_steps(&state.scope, &lost, BATCH)
            .await?;
        let n = steps.len();
        for step in steps {
            let sent = step.checkpoint.enqueued_at.is_some();
            let task = task_of(&step.namespace, step.checkpoint);
            let verdict = look(state, &task, sent).await;
            // Stamp strictly after the cutoff, and as sent by this live driver, so the next
            // batch does not fetch this step again; and after the look, so the next one, a
            // window after the stamp, comes a window after it.
            let stamp = state.clock.now().max(lost.sent_before + 1);
            match verdict {
                Verdict::Send => {
                    send(state, task, stamp).await?;
                    total += 1;
                }
                verdict => {
                    vanished += usize::from(matches!(verdict, Verdict::Vanished));
                    state
                        .store
                        .mark_dispatched(&task.run_id, task.seq, &state.config.owner, stamp)
                        .await?;
                }
            }
        }
        if n < BATCH as usize {
            if total > 0 {
                tracing::info!(steps = total, "redispatched remote steps with no result");
            }
            if vanished > 0 {
                tracing::info!(
                    steps = vanished,
                    "steps with no result whose jobs are gone: their results may be on the way; sent again if still without one a window from now"
                );
            }
            return Ok(total);
        }
    }
}
