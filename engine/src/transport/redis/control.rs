//! Control messages (cancels, notices) on the wire's control channel
//! ([`crate::transport::ControlChannel`]).

use async_trait::async_trait;

use super::{RedisTransport, unavailable};
use crate::model::ControlMessage;
use crate::transport::naming::control_channel;
use crate::transport::{ControlChannel, Subscription, TransportResult};

#[async_trait]
impl ControlChannel for RedisTransport {
    async fn publish_control(&self, mut message: ControlMessage) -> TransportResult<()> {
        message
            .from
            .get_or_insert_with(|| self.shared.instance.clone());
        let payload = serde_json::to_string(&message)
            .map_err(|e| unavailable(format!("encoding a control message: {e}")))?;
        self.publish(&control_channel(&self.shared.p), payload)
            .await
    }

    async fn subscribe_control(&self) -> TransportResult<Subscription<ControlMessage>> {
        self.listen_json(control_channel(&self.shared.p)).await
    }
}
