use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;

use super::EngineConfig;
use crate::model::{Run, RunId, Scope, TenantEvent, TenantEventKind};
use crate::runtime::{Clock, Registry};
use crate::store::Store;
use crate::transport::Transport;

/// What every loop of one engine shares.
pub(crate) struct Shared {
    pub store: Arc<dyn Store>,
    pub transport: Arc<dyn Transport>,
    pub registry: Arc<Registry>,
    pub clock: Arc<dyn Clock>,
    pub config: EngineConfig,
    /// The namespaces this engine drives.
    pub scope: Scope,
    /// Poked when a run may have become runnable, so the drive loop does not wait for its tick.
    pub wake: Notify,
    /// Runs whose turn is executing here; their leases are renewed.
    in_flight: Mutex<HashSet<RunId>>,
}

impl Shared {
    pub fn new(
        store: Arc<dyn Store>,
        transport: Arc<dyn Transport>,
        registry: Arc<Registry>,
        clock: Arc<dyn Clock>,
        config: EngineConfig,
    ) -> Self {
        let scope = match &config.namespace {
            Some(ns) => Scope::Only(ns.clone()),
            None => Scope::All,
        };
        Shared {
            store,
            transport,
            registry,
            clock,
            config,
            scope,
            wake: Notify::new(),
            in_flight: Mutex::default(),
        }
    }

    pub fn in_flight(&self) -> MutexGuard<'_, HashSet<RunId>> {
        self.in_flight.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Publishes the run's current status to its tenant. Losing an event only delays a live
    /// view, so a transport error is logged, not raised.
    pub async fn emit(&self, run: &Run, kind: TenantEventKind, seq: Option<u32>) {
        let event = TenantEvent {
            kind,
            namespace: run.namespace.clone(),
            run_id: run.id.clone(),
            workflow: run.workflow.clone(),
            status: run.status,
            seq,
            at: self.clock.now(),
        };
        if let Err(e) = self.transport.publish_event(event).await {
            tracing::warn!(run_id = %run.id, error = %e, "could not publish a tenant event");
        }
    }
}
