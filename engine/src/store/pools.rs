//! Tenants' routing definitions (their worker pools and their routing rules), and the version
//! of each tenant's: every edit bumps it in the edit's own transaction, so a control plane
//! holding a copy of an older version knows it is stale.

use async_trait::async_trait;

use super::StoreResult;
use crate::model::{Millis, Namespace, Pool, PoolName, RoutingRules};

/// What storing a pool did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolPut {
    /// The pool as stored (an existing pool keeps its `created_at`).
    pub pool: Pool,
    /// Whether it was new.
    pub created: bool,
    /// The tenant's definitions version after the edit.
    pub version: u64,
}

/// Pools and routing rules: per tenant, edited by its admins, read by every control plane's
/// routing.
#[async_trait]
pub trait Pools: Send + Sync + 'static {
    /// Creates `pool`, or replaces the labels of the tenant's pool of that name. Creating one
    /// more than `max_per_tenant` is refused ([`crate::store::StoreError::Refused`]).
    async fn put_pool(&self, pool: &Pool, max_per_tenant: usize) -> StoreResult<PoolPut>;

    /// The pools of `tenant`, by name.
    async fn pools(&self, tenant: &Namespace) -> StoreResult<Vec<Pool>>;

    /// Deletes pool `name` of `tenant`; the tenant's definitions version after it, or `None`
    /// when there was no such pool.
    async fn delete_pool(&self, tenant: &Namespace, name: &PoolName) -> StoreResult<Option<u64>>;

    /// The version of `tenant`'s routing definitions: 0 until its first edit.
    async fn definitions_version(&self, tenant: &Namespace) -> StoreResult<u64>;

    /// Replaces `tenant`'s routing rules (checked by the caller against its pools); the
    /// tenant's definitions version after the edit.
    async fn put_routing_rules(
        &self,
        tenant: &Namespace,
        rules: &RoutingRules,
        now: Millis,
    ) -> StoreResult<u64>;

    /// `tenant`'s routing rules, `None` until it sets some.
    async fn routing_rules(&self, tenant: &Namespace) -> StoreResult<Option<RoutingRules>>;

    /// How many of `tenant`'s remote steps were sent and have no result yet, by the routing
    /// token they were sent on: a pool's backlog, waiting or running.
    async fn steps_out(&self, tenant: &Namespace) -> StoreResult<Vec<(String, u64)>>;
}
