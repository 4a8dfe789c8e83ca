//! What a case heard on a tenant's event stream.

use std::time::Duration;

use durable::model::{TenantEvent, TenantEventKind};
use durable::transport::{EventDelivery, Subscription};
use futures::StreamExt;

/// The tenant events `events` delivers until it is quiet for 200 ms.
pub async fn heard(events: &mut Subscription<EventDelivery>) -> Vec<TenantEvent> {
    let mut heard = Vec::new();
    while let Ok(Some(EventDelivery::Event(ev))) =
        tokio::time::timeout(Duration::from_millis(200), events.next()).await
    {
        heard.push(ev);
    }
    heard
}

/// What `events` announced, in order.
pub fn kinds(events: &[TenantEvent]) -> Vec<TenantEventKind> {
    events.iter().map(|ev| ev.kind).collect()
}
