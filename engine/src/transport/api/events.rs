//! Per-tenant lifecycle events, for live views: hints to re-read, never a source of truth.

use async_trait::async_trait;

use crate::model::{Scope, TenantEvent};
use crate::transport::{EventDelivery, Subscription, TransportResult};

/// Publishing and watching tenant events.
#[async_trait]
pub trait TenantEvents: Send + Sync + 'static {
    /// Publishes a lifecycle event to its run's tenant.
    async fn publish_event(&self, event: TenantEvent) -> TransportResult<()>;

    /// Publishes `batch` in order: [`Transport::publish_event`] for each, in one broker round
    /// trip where the broker allows it (a burst of runs makes thousands of events a second).
    /// Every event is tried; the first failure is returned.
    async fn publish_events(&self, batch: Vec<TenantEvent>) -> TransportResult<()> {
        let mut failed = Ok(());
        for event in batch {
            let sent = self.publish_event(event).await;
            if failed.is_ok() {
                failed = sent;
            }
        }
        failed
    }

    /// Watches events of the namespaces `scope` admits.
    async fn subscribe_events(&self, scope: Scope) -> TransportResult<Subscription<EventDelivery>>;
}
