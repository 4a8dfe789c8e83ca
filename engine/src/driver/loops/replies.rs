//! What workers send back about remote work (aviary wire §2.6, §3): decisions, run and step
//! beats and step events, taken off the wire and handed to what waits for them.
//!
//! Every control plane consumes the shared decisions queue, so a decision may reach one that
//! did not send its turn. That one relays it to every control plane, and the sender applies it
//! instead of waiting out the silence window and sending the turn again.

use std::sync::Arc;

use futures::StreamExt;
use serde::Deserialize;
use serde_json::Value;
use tokio::sync::watch;

use crate::driver::state::State;
use crate::model::{Heartbeat, Millis, RunId, step_id};
use crate::store::NewCheckpoint;
use crate::transport::Subscription;

/// Takes decisions (queued and relayed), run beats and step events off the transport until
/// `stop`. A transport without remote turns sends no decisions or step events; a source that
/// fails to open is logged once and skipped.
pub(crate) async fn replies_loop(state: Arc<State>, mut stop: watch::Receiver<bool>) {
    let (mut queued, mut relayed, mut events) = match state.transport.remote_turns() {
        Some(turns) => (
            open("workflow decisions", turns.consume_decisions().await),
            open(
                "relayed decisions",
                turns.subscribe_relayed_decisions().await,
            ),
            open("step events", turns.consume_step_events().await),
        ),
        None => (silent(), silent(), silent()),
    };
    let mut beats = open(
        "worker heartbeats",
        state.transport.subscribe_heartbeats().await,
    );
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            Some(decision) = queued.next() => {
                if let Err(decision) = state.awaiting.deliver(decision) {
                    relay(&state, decision).await;
                }
            }
            Some(decision) = relayed.next() => {
                // Every control plane hears every relay: only the sender's waiter takes it.
                let _ = state.awaiting.deliver(decision);
            }
            Some(beat) = beats.next() => match beat.step_id {
                None => state.awaiting.beat(&beat.run_id),
                // A store write, on the side like step events.
                Some(_) => {
                    tokio::spawn(beat_step(state.clone(), beat));
                }
            },
            // Written on the side: a store write must not hold up the next decision.
            Some(event) = events.next() => {
                tokio::spawn(record_step_event(state.clone(), event));
            }
        }
    }
}

fn open<T: Send + 'static>(
    what: &str,
    opened: crate::transport::TransportResult<Subscription<T>>,
) -> Subscription<T> {
    opened.unwrap_or_else(|e| {
        tracing::warn!(error = %e, "cannot receive {what}; remote workflows may advance slowly");
        silent()
    })
}

/// A source that never sends anything.
fn silent<T: Send + 'static>() -> Subscription<T> {
    Box::pin(futures::stream::pending())
}

/// Passes on a decision no turn here awaits. One this process sent and already gave up on
/// comes back through the relay and is dropped there.
async fn relay(state: &State, decision: Value) {
    let task_id = decision
        .get("taskId")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    // Decisions come only from a transport with remote turns.
    let Some(turns) = state.transport.remote_turns() else {
        return;
    };
    if let Err(e) = turns.relay_decision(decision).await {
        tracing::warn!(task_id, error = %e, "could not relay a decision to the control plane awaiting it; it will send the turn again");
    }
}

/// A step-scoped beat (wire §2.6, sent by TypeScript workers): the step's timeout counts from
/// now. Its `stepId` must be the step's own `<runId>:<seq>`.
async fn beat_step(state: Arc<State>, beat: Heartbeat) {
    if beat.step_id != Some(step_id(&beat.run_id, beat.seq)) {
        tracing::debug!(run_id = %beat.run_id, seq = beat.seq, "dropped a step beat whose stepId is not runId:seq");
        return;
    }
    let now = state.clock.now();
    let stored = state
        .store
        .beat_step(&state.scope, &beat.run_id, beat.seq, &beat.group, now)
        .await;
    if let Err(e) = stored {
        tracing::warn!(run_id = %beat.run_id, seq = beat.seq, error = %e, "could not note a step beat; the step may time out");
    }
}

/// A step event (wire §3.7) as the Python worker sends it.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct StepEvent {
    run_id: RunId,
    seq: u32,
    name: String,
    phase: String,
    #[serde(default)]
    started_at: Option<Millis>,
    #[serde(default)]
    finished_at: Option<Millis>,
    #[serde(default)]
    output: Option<Value>,
}

/// Checkpoints a local step the worker finished inside a turn at once, before the turn's
/// decision: if the worker dies mid-turn, the turn sent again replays the step instead of
/// running it a second time. Only completed steps are kept; the decision records the rest.
async fn record_step_event(state: Arc<State>, raw: Value) {
    let event: StepEvent = match serde_json::from_value(raw) {
        Ok(event) => event,
        Err(e) => {
            tracing::warn!(error = %e, "dropped a malformed step event");
            return;
        }
    };
    if event.phase != "completed" {
        return;
    }
    let now = state.clock.now();
    let checkpoint = NewCheckpoint::recorded_step(
        event.seq,
        event.name,
        Some(event.output.unwrap_or(Value::Null)),
        None,
        event.started_at.unwrap_or(now),
        event.finished_at.unwrap_or(now),
    );
    if let Err(e) = state
        .store
        .record_local_step(&state.scope, &event.run_id, checkpoint)
        .await
    {
        tracing::warn!(run_id = %event.run_id, seq = event.seq, error = %e, "could not checkpoint a step event; the turn's decision records the step");
    }
}
