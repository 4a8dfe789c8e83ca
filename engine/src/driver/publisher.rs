//! Tenant events leave through one publisher task, off the path of the work that caused them:
//! a turn never waits for a broker round trip to tell dashboards what it did.
//!
//! Events keep their order: the task sends what is queued (up to [`BATCH`] events) as one
//! batch, in order, in one broker round trip. They are hints for live views (a dashboard re-reads
//! the run), so when the broker falls far behind, new events are dropped rather than held
//! without bound.

use std::sync::{Arc, OnceLock};

use tokio::sync::mpsc;

use crate::model::TenantEvent;
use crate::transport::Transport;

/// Events waiting for the broker before new ones are dropped.
const QUEUE: usize = 16_384;
/// The most events sent together, in one broker round trip: the slower the broker answers, the
/// more each batch carries.
const BATCH: usize = 512;

/// The sending side; the task starts with the first event (inside the runtime).
pub(crate) struct Publisher {
    transport: Arc<dyn Transport>,
    queue: OnceLock<mpsc::Sender<TenantEvent>>,
}

impl Publisher {
    pub fn new(transport: Arc<dyn Transport>) -> Self {
        Publisher {
            transport,
            queue: OnceLock::new(),
        }
    }

    /// Queues `event` for publication; never waits.
    pub fn publish(&self, event: TenantEvent) {
        let queue = self.queue.get_or_init(|| {
            let (tx, rx) = mpsc::channel(QUEUE);
            tokio::spawn(publish_loop(self.transport.clone(), rx));
            tx
        });
        if let Err(e) = queue.try_send(event) {
            tracing::warn!(run_id = %e.into_inner().run_id, "dropped a tenant event: the broker is not keeping up");
        }
    }
}

async fn publish_loop(transport: Arc<dyn Transport>, mut queue: mpsc::Receiver<TenantEvent>) {
    let mut batch = Vec::with_capacity(BATCH);
    while queue.recv_many(&mut batch, BATCH).await > 0 {
        let sent = std::mem::replace(&mut batch, Vec::with_capacity(BATCH));
        let count = sent.len();
        if let Err(e) = transport.publish_events(sent).await {
            tracing::warn!(events = count, error = %e, "could not publish tenant events");
        }
    }
}
