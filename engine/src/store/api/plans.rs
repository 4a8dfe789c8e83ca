//! Tenants' plans and what they use against them (SPEC §8): stored with the runs, so every
//! control plane on one database enforces the same ceilings.

use async_trait::async_trait;

use crate::model::{Millis, Namespace, Plan, Usage};
use crate::store::StoreResult;

/// Reading and writing plans, and counting a tenant's usage.
#[async_trait]
pub trait Plans: Send + Sync + 'static {
    /// The default plan (`None`) and every tenant's own, as set (not merged).
    async fn plans(&self) -> StoreResult<Vec<(Option<Namespace>, Plan)>>;

    /// Sets the default plan (`tenant` `None`) or a tenant's own; an all-unset plan removes the
    /// tenant's row (it then follows the default).
    async fn put_plan(
        &self,
        tenant: Option<&Namespace>,
        plan: &Plan,
        now: Millis,
    ) -> StoreResult<()>;

    /// What `tenant` uses now: runs started and not ended, runs accepted and not started, and
    /// runs created since `now - 60 s`.
    async fn usage(&self, tenant: &Namespace, now: Millis) -> StoreResult<Usage>;

    /// How many of `tenant`'s top-level runs are started and not ended: what its concurrency
    /// ceiling counts (one count, where [`Plans::usage`] takes three).
    async fn started(&self, tenant: &Namespace) -> StoreResult<u64>;

    /// How many runs of `tenant`'s `workflow` with concurrency key `key` are started and not
    /// ended: what a queued run with that key waits on.
    async fn started_with_key(
        &self,
        tenant: &Namespace,
        workflow: &str,
        key: &str,
    ) -> StoreResult<u64>;
}
