//! The workers announced on the broker, and their heartbeats
//! ([`crate::transport::WorkerRegistry`]).

use async_trait::async_trait;
use futures::StreamExt;

use super::{RedisTransport, registry, unavailable};
use crate::model::{Heartbeat, Namespace, PoolName, Scope, WorkerDescriptor, WorkerGroup};
use crate::transport::naming::heartbeat_channel;
use crate::transport::{Subscription, TransportError, TransportResult, WorkerRegistry};

#[async_trait]
impl WorkerRegistry for RedisTransport {
    async fn worker_groups(&self, scope: &Scope) -> TransportResult<Vec<WorkerGroup>> {
        registry::groups(&self.shared, scope)
            .await
            .map_err(|e| unavailable(format!("reading worker registrations: {e}")))
    }

    async fn worker_descriptors(&self, token: &str) -> TransportResult<Vec<WorkerDescriptor>> {
        registry::Directory::descriptors(&self.shared, token)
            .await
            .map_err(|e| unavailable(format!("reading worker descriptors: {e}")))
    }

    async fn publish_heartbeat(&self, mut beat: Heartbeat) -> TransportResult<()> {
        self.shared
            .tokens
            .into_wire(&mut beat.group)
            .map_err(TransportError::Unsupported)?;
        let payload = serde_json::to_string(&beat)
            .map_err(|e| unavailable(format!("encoding a heartbeat: {e}")))?;
        self.publish(&heartbeat_channel(&self.shared.p), payload)
            .await
    }

    async fn subscribe_heartbeats(&self) -> TransportResult<Subscription<Heartbeat>> {
        let tokens = self.shared.tokens.clone();
        let beats = self
            .listen_json::<Heartbeat>(heartbeat_channel(&self.shared.p))
            .await?;
        Ok(Box::pin(beats.map(move |mut beat| {
            tokens.from_wire(&mut beat.group);
            beat
        })))
    }

    /// One hash per pool, `tenant → weight`, replaced whole in one transaction; the pool's
    /// workers read it again every few seconds ([`super::shared_pools`]).
    async fn publish_grants(
        &self,
        pool: &PoolName,
        grants: &[(Namespace, u32)],
    ) -> TransportResult<()> {
        let key = crate::transport::naming::pool_grants_key(&self.shared.p, pool.as_str());
        let mut pipe = redis::pipe();
        pipe.atomic().del(&key).ignore();
        if !grants.is_empty() {
            let fields: Vec<(&str, u32)> = grants.iter().map(|(t, w)| (t.as_str(), *w)).collect();
            pipe.hset_multiple(&key, &fields).ignore();
        }
        let mut conn = self.shared.conn.clone();
        pipe.query_async::<()>(&mut conn)
            .await
            .map_err(|e| unavailable(format!("publishing the grants of pool {pool}: {e}")))
    }
}
