//! Definition notices between control planes ([`crate::transport::DefinitionNotices`]), on
//! the `P-definitions` channel.

use async_trait::async_trait;

use super::{RedisTransport, unavailable};
use crate::transport::naming::definitions_channel;
use crate::transport::{DefinitionNotices, DefinitionsNotice, Subscription, TransportResult};

#[async_trait]
impl DefinitionNotices for RedisTransport {
    fn reaches_peers(&self) -> bool {
        true
    }

    async fn publish_definitions(&self, notice: DefinitionsNotice) -> TransportResult<()> {
        let payload = serde_json::to_string(&notice)
            .map_err(|e| unavailable(format!("encoding a definitions notice: {e}")))?;
        self.publish(&definitions_channel(&self.shared.p), payload)
            .await
    }

    async fn subscribe_definitions(&self) -> TransportResult<Subscription<DefinitionsNotice>> {
        self.listen_json(definitions_channel(&self.shared.p)).await
    }
}
