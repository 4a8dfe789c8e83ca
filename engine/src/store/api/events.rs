//! Published events: delivered to the waits of one tenant's runs, once per event id.

use async_trait::async_trait;

use crate::model::{Millis, Namespace, PublishedEvent};
use crate::store::{EventDelivered, StoreResult};

/// Delivering events to the runs waiting for them.
#[async_trait]
pub trait Events: Send + Sync + 'static {
    /// Resolves, with `event`'s payload, every pending wait for it of `tenant`'s live runs
    /// whose filter it passes, and wakes those runs; in one transaction. With an id, the event
    /// is kept: published again under that id, it reaches nothing and says how many runs it
    /// reached the first time.
    async fn deliver_event(
        &self,
        tenant: &Namespace,
        event: &PublishedEvent,
        now: Millis,
    ) -> StoreResult<EventDelivered>;
}
