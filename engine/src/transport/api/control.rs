//! The control channel: notices every process hears (a run was cancelled, so its in-flight
//! steps can stop).

use async_trait::async_trait;

use crate::model::ControlMessage;
use crate::transport::{Subscription, TransportResult};

/// Broadcast control notices.
#[async_trait]
pub trait ControlChannel: Send + Sync + 'static {
    /// Broadcasts a control message (a cancel notice) to every process, this one included.
    async fn publish_control(&self, message: ControlMessage) -> TransportResult<()>;

    /// Hears every control message from now on (nothing is replayed to a late subscriber).
    async fn subscribe_control(&self) -> TransportResult<Subscription<ControlMessage>>;
}
