//! Run requests and start-run messages from store-less pods to the control plane's responder,
//! and the replies back (wire §4).

use async_trait::async_trait;

use crate::model::RunReply;
use crate::transport::{Subscription, TransportResult};

/// The run-request door for pods without a store.
#[async_trait]
pub trait RunRequests: Send + Sync + 'static {
    /// Queues a run request as a tenant pod sends it (raw JSON: the control plane's responder
    /// decides what to make of it).
    async fn send_run_request(&self, request: String) -> TransportResult<()>;

    /// Consumes run requests (the control plane's responder), raw, so that a malformed one
    /// still reaches the responder, which answers it or logs it and goes on.
    async fn consume_run_requests(&self) -> TransportResult<Subscription<String>>;

    /// Queues a start-run message (wire §4.1, raw JSON: the responder decides what to make of
    /// it, as for run requests).
    async fn send_start_run(&self, message: String) -> TransportResult<()>;

    /// Consumes start-run messages (the control plane's responder), raw.
    async fn consume_start_runs(&self) -> TransportResult<Subscription<String>>;

    /// Publishes a reply on the channel every tenant pod shares (they match `requestId`).
    async fn publish_run_reply(&self, reply: RunReply) -> TransportResult<()>;

    /// Hears every run reply from now on.
    async fn subscribe_run_replies(&self) -> TransportResult<Subscription<RunReply>>;
}
