//! Runs requested over the wire by a store-less client, and their replies
//! ([`crate::transport::RunRequests`]).

use async_trait::async_trait;

use super::queue::Retention;
use super::{RedisTransport, unavailable};
use crate::model::RunReply;
use crate::transport::naming::{run_reply_channel, run_request_queue, start_run_queue};
use crate::transport::{RunRequests, Subscription, TransportResult};

#[async_trait]
impl RunRequests for RedisTransport {
    async fn send_run_request(&self, request: String) -> TransportResult<()> {
        self.add(
            &run_request_queue(&self.shared.p),
            "runRequest",
            request,
            Retention::Message,
        )
        .await
    }

    async fn consume_run_requests(&self) -> TransportResult<Subscription<String>> {
        Ok(self.consume_raw(run_request_queue(&self.shared.p)))
    }

    async fn send_start_run(&self, message: String) -> TransportResult<()> {
        self.add(
            &start_run_queue(&self.shared.p),
            "startRun",
            message,
            Retention::Message,
        )
        .await
    }

    async fn consume_start_runs(&self) -> TransportResult<Subscription<String>> {
        Ok(self.consume_raw(start_run_queue(&self.shared.p)))
    }

    async fn publish_run_reply(&self, reply: RunReply) -> TransportResult<()> {
        let payload = serde_json::to_string(&reply)
            .map_err(|e| unavailable(format!("encoding a run reply: {e}")))?;
        self.publish(&run_reply_channel(&self.shared.p), payload)
            .await
    }

    async fn subscribe_run_replies(&self) -> TransportResult<Subscription<RunReply>> {
        self.listen_json(run_reply_channel(&self.shared.p)).await
    }
}
