//! Moving work between the control plane and workers: step tasks out, results back, and
//! per-tenant lifecycle events to whoever watches.
//!
//! [`Transport`] is the one seam; [`MemoryTransport`] is the in-process reference used by the
//! embedded default. Queue and key names are built only in [`naming`].

#[cfg(any(test, feature = "test-util"))]
pub mod conformance;
mod memory;
pub mod naming;
#[cfg(feature = "redis")]
mod redis;

use std::pin::Pin;

use async_trait::async_trait;
use futures::Stream;

use crate::model::{
    ControlMessage, Heartbeat, Millis, Namespace, Protocol, Registration, RemoteTask, RunReply,
    Scope, Sdk, StepResult, TenantEvent, WorkerDescriptor, WorkerGroup,
};

#[cfg(all(feature = "redis", any(test, feature = "test-util")))]
pub use self::redis::testing as redis_testing;
#[cfg(feature = "redis")]
pub use self::redis::{RedisConfig, RedisTransport};
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
    /// Only these (`default` means the bare, unsuffixed tokens).
    Only(Vec<Namespace>),
    /// Every partition. Only an embedded worker in a standalone process, which is the whole
    /// cluster, asks for this; a shared broker refuses it.
    All,
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

    /// What a worker consuming this subscription announces (wire §6.1). A Rust process says
    /// `runtime: "node"` until the SDKs accept more (wire §8.17). Each workflow version it runs
    /// is a registration, so a control plane sends it only the turns of those versions.
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
            runtime: "node".into(),
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

/// Carries tasks, results and tenant events. The engine cannot tell implementations apart.
#[async_trait]
pub trait Transport: Send + Sync + 'static {
    /// Queues `task` on its routing token (`task.group`).
    async fn dispatch(&self, task: RemoteTask) -> TransportResult<()>;

    /// Consumes tasks for `subscription`; competing consumers each get a share.
    async fn consume_tasks(
        &self,
        subscription: TaskSubscription,
    ) -> TransportResult<Subscription<RemoteTask>>;

    /// Sends a step's result back to the control plane: on the queue its task named
    /// (`reply_to`, see [`RemoteTask::reply_to`]) while the control plane that consumes that
    /// queue is alive, else on the queue every control plane consumes.
    async fn publish_result(
        &self,
        result: StepResult,
        reply_to: Option<&str>,
    ) -> TransportResult<()>;

    /// Consumes step results (the control plane's side).
    async fn consume_results(&self) -> TransportResult<Subscription<StepResult>>;

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

    /// Broadcasts a control message (a cancel notice) to every process, this one included.
    async fn publish_control(&self, message: ControlMessage) -> TransportResult<()>;

    /// Hears every control message from now on (nothing is replayed to a late subscriber).
    async fn subscribe_control(&self) -> TransportResult<Subscription<ControlMessage>>;

    /// The live worker groups whose partition `scope` admits (plus groups serving every
    /// partition), by name: worker health for the dashboard, and whether a waiting step has
    /// anyone to run it.
    async fn worker_groups(&self, scope: &Scope) -> TransportResult<Vec<WorkerGroup>>;

    /// The descriptors the live workers on routing token `token` announced (wire §6.1), for
    /// the dispatch guard (wire §6.4). It may lag the workers by a few seconds; empty when no
    /// worker there announced one.
    async fn worker_descriptors(&self, token: &str) -> TransportResult<Vec<WorkerDescriptor>>;

    /// Queues a workflow turn (wire §3.2: `task` is the `WorkflowTask` JSON) on its `group`
    /// token, for a worker that runs that workflow.
    async fn dispatch_turn(&self, task: serde_json::Value) -> TransportResult<()>;

    /// Consumes workflow decisions (wire §3.4), raw: the driver matches them to the turns it
    /// sent by `taskId`.
    async fn consume_decisions(&self) -> TransportResult<Subscription<serde_json::Value>>;

    /// Consumes workflow turns (wire §3.2, raw) for `subscription.workflows` on its partitions:
    /// the worker's side of remote turns.
    async fn consume_turns(
        &self,
        subscription: TaskSubscription,
    ) -> TransportResult<Subscription<serde_json::Value>>;

    /// Sends a turn's decision (wire §3.4) back to the control plane.
    async fn publish_decision(&self, decision: serde_json::Value) -> TransportResult<()>;

    /// Passes a decision this process took off the queue, but whose turn another control plane
    /// sent, to every control plane: the sender applies it instead of sending the turn again.
    async fn relay_decision(&self, decision: serde_json::Value) -> TransportResult<()>;

    /// Hears every relayed decision from now on (this process's own relays included).
    async fn subscribe_relayed_decisions(&self)
    -> TransportResult<Subscription<serde_json::Value>>;

    /// Beats for a run whose turn a worker is replaying, or for a step it runs (wire §2.6).
    async fn publish_heartbeat(&self, beat: Heartbeat) -> TransportResult<()>;

    /// Hears every worker's beats from now on.
    async fn subscribe_heartbeats(&self) -> TransportResult<Subscription<Heartbeat>>;

    /// Consumes step events (wire §3.7, raw): local steps a worker finished inside a turn,
    /// reported before the turn's decision.
    async fn consume_step_events(&self) -> TransportResult<Subscription<serde_json::Value>>;

    /// Queues a run request as a tenant pod sends it (raw JSON: the control plane's responder
    /// decides what to make of it).
    async fn send_run_request(&self, request: String) -> TransportResult<()>;

    /// Consumes run requests (the control plane's responder), raw, so that a malformed one
    /// still reaches the responder, which answers it or logs it and goes on.
    async fn consume_run_requests(&self) -> TransportResult<Subscription<String>>;

    /// Queues a start-run message (wire §4.1, raw JSON: the responder decides what to make of
    /// it, as for run requests).
    async fn send_start_run(&self, message: String) -> TransportResult<()>;

    /// Consumes start-run messages (the control plane's responder), raw.
    async fn consume_start_runs(&self) -> TransportResult<Subscription<String>>;

    /// Publishes a reply on the channel every tenant pod shares (they match `requestId`).
    async fn publish_run_reply(&self, reply: RunReply) -> TransportResult<()>;

    /// Hears every run reply from now on.
    async fn subscribe_run_replies(&self) -> TransportResult<Subscription<RunReply>>;

    /// Whether queued tasks survive a restart of this process. When they do not (in-process),
    /// the engine re-dispatches every waiting step at start-up.
    fn retains_tasks(&self) -> bool;
}
