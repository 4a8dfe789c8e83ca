//! Who is alive and what they can do: worker groups, their descriptors (wire §6.1) and
//! heartbeats (wire §2.6).

use async_trait::async_trait;

use crate::model::{Heartbeat, Namespace, PoolName, Scope, WorkerDescriptor, WorkerGroup};
use crate::transport::{Subscription, TransportResult};

/// The live workers, for the dispatch guard, the dashboard and remote turns' silence windows.
#[async_trait]
pub trait WorkerRegistry: Send + Sync + 'static {
    /// The live worker groups whose partition `scope` admits (plus groups serving every
    /// partition), by name: worker health for the dashboard, and whether a waiting step has
    /// anyone to run it.
    async fn worker_groups(&self, scope: &Scope) -> TransportResult<Vec<WorkerGroup>>;

    /// The descriptors the live workers on routing token `token` announced (wire §6.1), for
    /// the dispatch guard (wire §6.4). It may lag the workers by a few seconds; empty when no
    /// worker there announced one.
    async fn worker_descriptors(&self, token: &str) -> TransportResult<Vec<WorkerDescriptor>>;

    /// Beats for a run whose turn a worker is replaying, or for a step it runs (wire §2.6).
    async fn publish_heartbeat(&self, beat: Heartbeat) -> TransportResult<()>;

    /// Hears every worker's beats from now on.
    async fn subscribe_heartbeats(&self) -> TransportResult<Subscription<Heartbeat>>;

    /// Tells shared pool `pool`'s workers the tenants it is granted to, each with its weight
    /// (its plan's): what they serve, and how fairly. Replaces what was told before. An
    /// in-process transport, whose one worker serves every partition, keeps nothing.
    async fn publish_grants(
        &self,
        pool: &PoolName,
        grants: &[(Namespace, u32)],
    ) -> TransportResult<()>;
}
