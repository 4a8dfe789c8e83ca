//! The live-event hub: one transport subscription per scope (a tenant's namespace, or every
//! namespace for operators) in this process, fanned out to every SSE client of that scope.
//! Each event is serialized once, however many browser tabs watch it, and a thousand tabs cost
//! one Redis subscription, not a thousand.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use durable::model::{Namespace, Scope};
use durable::transport::{EventDelivery, Transport, TransportError};
use futures::StreamExt;
use serde_json::json;
use tokio::sync::broadcast;

/// Events a slow client may fall behind by before it is told to re-read.
const BUFFER: usize = 4096;

/// One event as every client of its scope receives it: the SSE `data` line, serialized once.
pub type Frame = Arc<str>;

/// Shares transport subscriptions among SSE clients. Cheap to clone.
#[derive(Clone)]
pub struct LiveHub {
    transport: Arc<dyn Transport>,
    scopes: Arc<Mutex<HashMap<Option<Namespace>, broadcast::Sender<Frame>>>>,
}

impl LiveHub {
    /// A hub over `transport`'s tenant events.
    pub fn new(transport: Arc<dyn Transport>) -> Self {
        LiveHub {
            transport,
            scopes: Arc::default(),
        }
    }

    fn scopes(&self) -> MutexGuard<'_, HashMap<Option<Namespace>, broadcast::Sender<Frame>>> {
        // A poisoned map only means a pump panicked mid-insert; the map itself is still valid.
        self.scopes.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The frames of `scope` from now on. The first client of a scope opens its transport
    /// subscription; it is closed once the last client has gone.
    pub async fn subscribe(
        &self,
        scope: Scope,
    ) -> Result<broadcast::Receiver<Frame>, TransportError> {
        let key = scope.namespace().cloned();
        if let Some(tx) = self.scopes().get(&key) {
            return Ok(tx.subscribe());
        }
        let deliveries = self.transport.subscribe_events(scope).await?;
        let mut scopes = self.scopes();
        // Another client may have opened it meanwhile: share theirs, drop ours.
        if let Some(tx) = scopes.get(&key) {
            return Ok(tx.subscribe());
        }
        let (tx, rx) = broadcast::channel(BUFFER);
        scopes.insert(key.clone(), tx.clone());
        drop(scopes);
        tokio::spawn(pump(self.clone(), key, tx, deliveries));
        Ok(rx)
    }
}

/// Serializes each delivery once and hands it to every client, until no client is left.
async fn pump(
    hub: LiveHub,
    key: Option<Namespace>,
    tx: broadcast::Sender<Frame>,
    mut deliveries: durable::transport::Subscription<EventDelivery>,
) {
    while let Some(delivery) = deliveries.next().await {
        let frame: Frame = match delivery {
            EventDelivery::Event(ev) => serde_json::to_string(&ev).unwrap_or_default().into(),
            // The hub itself fell behind the transport: every client should re-read.
            EventDelivery::Lagged(n) => json!({ "resync": n }).to_string().into(),
        };
        if tx.send(frame).is_err() {
            // Checked again under the lock: a client subscribing right now keeps it open.
            let mut scopes = hub.scopes();
            if tx.receiver_count() == 0 {
                scopes.remove(&key);
                return;
            }
        }
    }
    hub.scopes().remove(&key);
}

#[cfg(test)]
mod tests {
    use durable::model::{RunId, RunStatus, TenantEvent, TenantEventKind};
    use durable::transport::{MemoryTransport, TenantEvents};

    use super::*;

    fn event(run: &str, ns: &str) -> TenantEvent {
        TenantEvent {
            kind: TenantEventKind::RunCompleted,
            namespace: Namespace::parse(ns).expect("ns"),
            run_id: RunId::parse(run).expect("id"),
            workflow: "wf".into(),
            status: RunStatus::Completed,
            seq: None,
            at: 1,
        }
    }

    #[tokio::test]
    async fn clients_of_a_scope_share_one_subscription_and_see_only_their_tenant() {
        let transport = Arc::new(MemoryTransport::new());
        let hub = LiveHub::new(transport.clone());
        let acme = || Scope::Only(Namespace::parse("acme").expect("ns"));
        let mut one = hub.subscribe(acme()).await.expect("subscribe");
        let mut two = hub.subscribe(acme()).await.expect("subscribe");
        let mut all = hub.subscribe(Scope::All).await.expect("subscribe");
        assert_eq!(hub.scopes().len(), 2, "one subscription per scope");
        transport
            .publish_event(event("run-g", "globex"))
            .await
            .expect("publish");
        transport
            .publish_event(event("run-a", "acme"))
            .await
            .expect("publish");
        for rx in [&mut one, &mut two] {
            let frame = rx.recv().await.expect("frame");
            assert!(frame.contains("run-a"), "{frame}");
            assert!(rx.try_recv().is_err(), "no globex event reaches acme");
        }
        assert!(all.recv().await.expect("frame").contains("run-g"));
        assert!(all.recv().await.expect("frame").contains("run-a"));

        // The last acme client leaves: the next acme event closes acme's subscription.
        drop((one, two));
        transport
            .publish_event(event("run-a2", "acme"))
            .await
            .expect("publish");
        assert!(all.recv().await.expect("frame").contains("run-a2"));
        tokio::task::yield_now().await;
        for _ in 0..100 {
            if hub.scopes().len() == 1 {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        panic!("the scope nobody watches is still open");
    }
}
