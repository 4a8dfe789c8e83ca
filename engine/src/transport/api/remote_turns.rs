//! Workflow turns run by a worker (wire §3): turns out, decisions and step events back, and
//! the relay that brings a decision to the control plane that sent its turn. Only a transport
//! that reaches workers in other processes offers it (see [`super::Transport::remote_turns`]).

use async_trait::async_trait;

use crate::model::Receipt;
use crate::transport::{Subscription, TaskSubscription, TransportResult};

/// A workflow turn a worker took (wire §3.2, raw), with the broker's hold on it: settled once
/// the turn's decision is sent, so a worker that dies first leaves the turn to another.
#[derive(Debug)]
pub struct TurnTask {
    /// The `WorkflowTask` JSON.
    pub task: serde_json::Value,
    /// Settles the turn's job when dropped.
    pub receipt: Receipt,
}

/// Remote workflow turns.
#[async_trait]
pub trait RemoteTurns: Send + Sync + 'static {
    /// Queues a workflow turn (wire §3.2: `task` is the `WorkflowTask` JSON) on its `group`
    /// token, for a worker that runs that workflow.
    async fn dispatch_turn(&self, task: serde_json::Value) -> TransportResult<()>;

    /// Consumes workflow decisions (wire §3.4), raw: the driver matches them to the turns it
    /// sent by `taskId`.
    async fn consume_decisions(&self) -> TransportResult<Subscription<serde_json::Value>>;

    /// Consumes workflow turns (wire §3.2, raw) for `subscription.workflows` on its partitions:
    /// the worker's side of remote turns.
    async fn consume_turns(
        &self,
        subscription: TaskSubscription,
    ) -> TransportResult<Subscription<TurnTask>>;

    /// Sends a turn's decision (wire §3.4) back to the control plane.
    async fn publish_decision(&self, decision: serde_json::Value) -> TransportResult<()>;

    /// Passes a decision this process took off the queue, but whose turn another control plane
    /// sent, to every control plane: the sender applies it instead of sending the turn again.
    async fn relay_decision(&self, decision: serde_json::Value) -> TransportResult<()>;

    /// Hears every relayed decision from now on (this process's own relays included).
    async fn subscribe_relayed_decisions(&self)
    -> TransportResult<Subscription<serde_json::Value>>;

    /// Consumes step events (wire §3.7, raw): local steps a worker finished inside a turn,
    /// reported before the turn's decision.
    async fn consume_step_events(&self) -> TransportResult<Subscription<serde_json::Value>>;
}
