//! Workflow turns run by SDK workers on the broker ([`crate::transport::RemoteTurns`]).

use async_trait::async_trait;
use futures::StreamExt;

use super::RedisTransport;
use super::queue::Retention;
use crate::transport::naming::{
    decision_relay_channel, decisions_queue, step_events_queue, tasks_queue,
};
use crate::transport::{
    RemoteTurns, Subscription, TaskSubscription, TransportError, TransportResult, TurnTask,
};

#[async_trait]
impl RemoteTurns for RedisTransport {
    async fn consume_turns(
        &self,
        subscription: TaskSubscription,
    ) -> TransportResult<Subscription<TurnTask>> {
        let names = subscription.workflow_names();
        let tokens = self.shared.tokens.clone();
        let turns = self.consume_announced::<serde_json::Value>(subscription, &names, "turn")?;
        Ok(Box::pin(turns.map(move |(mut task, receipt)| {
            if let Some(serde_json::Value::String(group)) = task.get_mut("group") {
                tokens.from_wire(group);
            }
            TurnTask { task, receipt }
        })))
    }

    async fn publish_decision(&self, decision: serde_json::Value) -> TransportResult<()> {
        self.add(
            &decisions_queue(&self.shared.p),
            "decision",
            decision.to_string(),
            Retention::Message,
        )
        .await
    }

    async fn dispatch_turn(&self, mut task: serde_json::Value) -> TransportResult<()> {
        let group = task
            .get("group")
            .and_then(serde_json::Value::as_str)
            .ok_or_else(|| {
                TransportError::Unsupported("a workflow task needs its `group`".into())
            })?;
        let group = self.wire_token(group)?;
        let queue = tasks_queue(&self.shared.p, &group);
        task["group"] = group.into();
        self.add(&queue, "workflow", task.to_string(), Retention::Message)
            .await
    }

    async fn consume_decisions(&self) -> TransportResult<Subscription<serde_json::Value>> {
        let (decisions, _alive) =
            self.consume::<serde_json::Value>(vec![decisions_queue(&self.shared.p)], "decision");
        Ok(decisions)
    }

    async fn relay_decision(&self, decision: serde_json::Value) -> TransportResult<()> {
        self.publish(
            &decision_relay_channel(&self.shared.p),
            decision.to_string(),
        )
        .await
    }

    async fn subscribe_relayed_decisions(
        &self,
    ) -> TransportResult<Subscription<serde_json::Value>> {
        self.listen_json(decision_relay_channel(&self.shared.p))
            .await
    }

    async fn consume_step_events(&self) -> TransportResult<Subscription<serde_json::Value>> {
        let (events, _alive) = self
            .consume::<serde_json::Value>(vec![step_events_queue(&self.shared.p)], "step event");
        Ok(events)
    }
}
