//! Moving work between the control plane and workers: step tasks out, results back, and
//! per-tenant lifecycle events to whoever watches.
//!
//! [`Transport`] is the seam, split into capability traits by concern ([`api`]);
//! [`MemoryTransport`] is the in-process reference used by the embedded default. Queue and key names are built only in [`naming`].

pub mod api;
#[cfg(any(test, feature = "test-util"))]
pub mod conformance;
mod memory;
pub mod naming;
#[cfg(feature = "redis")]
mod redis;

use std::pin::Pin;

use futures::Stream;

use crate::model::{
    Millis, Partition, PoolName, Protocol, Registration, Sdk, TenantEvent, WorkerDescriptor,
};

#[cfg(all(feature = "redis", any(test, feature = "test-util")))]
pub use self::redis::testing as redis_testing;
#[cfg(feature = "redis")]
pub use self::redis::{RedisConfig, RedisTransport};
pub use api::{
    ControlChannel, DefinitionNotices, DefinitionsNotice, RateLimits, RemoteTurns, RunRequests,
    SlotClaim, Slots, StepQueues, TenantEvents, Transport, TurnTask, WorkerRegistry,
};
pub use memory::MemoryTransport;

/// Why a transport call failed.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    /// The broker could not be reached; retrying may help.
    #[error("the transport is unavailable: {0}")]
    Unavailable(String),
    /// The transport was shut down.
    #[error("the transport is closed")]
    Closed,
    /// The subscription is not possible on this transport.
    #[error("unsupported subscription: {0}")]
    Unsupported(String),
}

/// The result of a transport call.
pub type TransportResult<T, E = TransportError> = Result<T, E>;

/// Which partitions a worker serves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Partitions {
    /// Only these: tenants' own partitions or pools (`default` means the bare, unsuffixed
    /// tokens).
    Only(Vec<Partition>),
    /// Every partition. Only an embedded worker in a standalone process, which is the whole
    /// cluster, asks for this; a shared broker refuses it.
    All,
    /// An operator's shared pool: the pool's partition of every tenant it is granted to
    /// (`<tenant>.<pool>`), as the control planes publish the grants, taken from fairly by the
    /// tenants' weights. Only a shared broker offers it: an in-process transport's one worker
    /// serves every partition already.
    Shared(PoolName),
}

/// What a worker consumes: step names on some partitions.
#[derive(Clone, Debug)]
pub struct TaskSubscription {
    /// The registered step names.
    pub names: Vec<String>,
    /// The partitions served.
    pub partitions: Partitions,
    /// How many tasks the worker runs at once (announced in its liveness value).
    pub concurrency: usize,
    /// The workflows whose turns it also runs, each `(name, version)` (announced, the versions
    /// as `registrations`; consumed by [`Transport::consume_turns`], one queue per name).
    pub workflows: Vec<(String, u32)>,
    /// The capabilities it advertises (wire §6.1), which the control plane's dispatch guard
    /// matches against what a step requires.
    pub capabilities: Vec<String>,
}

impl TaskSubscription {
    /// The names of the workflows whose turns it runs, sorted, each once.
    pub fn workflow_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.workflows.iter().map(|(n, _)| n.clone()).collect();
        names.sort();
        names.dedup();
        names
    }

    /// What a worker consuming this subscription announces (wire §6.1), as `runtime: "rust"`.
    /// Each workflow version it runs is a registration, so a control plane sends it only the
    /// turns of those versions.
    pub fn descriptor(&self, instance_id: &str, started_at: Millis) -> WorkerDescriptor {
        let sorted = |v: &[String]| {
            let mut v = v.to_vec();
            v.sort();
            v.dedup();
            v
        };
        let registrations: Vec<Registration> = self
            .workflows
            .iter()
            .map(|(name, version)| Registration {
                name: name.clone(),
                version: Some(version.to_string()),
                group: None,
                requires: None,
                origin: None,
                on_error: None,
            })
            .collect();
        WorkerDescriptor {
            instance_id: instance_id.to_owned(),
            runtime: "rust".into(),
            sdk: Sdk {
                name: "durable-rs".into(),
                version: env!("CARGO_PKG_VERSION").into(),
            },
            protocol: Protocol::default(),
            capabilities: sorted(&self.capabilities),
            workflows: self.workflow_names(),
            steps: sorted(&self.names),
            // Absent rather than empty for a step-only worker, as the SDKs announce it.
            registrations: (!registrations.is_empty()).then_some(registrations),
            partition: match &self.partitions {
                Partitions::Only(one) if one.len() == 1 && !one[0].is_default() => {
                    Some(one[0].to_string())
                }
                _ => None,
            },
            namespace: None,
            started_at,
        }
    }
}

/// A stream of items from the transport.
pub type Subscription<T> = Pin<Box<dyn Stream<Item = T> + Send>>;

/// A tenant event, or notice that some were dropped because the reader fell behind (the reader
/// should re-read state rather than trust its copy).
#[derive(Clone, Debug, PartialEq)]
pub enum EventDelivery {
    /// An event.
    Event(TenantEvent),
    /// This many events were skipped.
    Lagged(u64),
}
