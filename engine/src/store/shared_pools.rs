//! Operators' shared pools and the tenants they are granted to. A grant or a revocation bumps
//! the tenant's definitions version, as an edit of its own pools does, so every control plane
//! routes by it from its next dispatch decision.

use async_trait::async_trait;

use super::StoreResult;
use crate::model::{Millis, Namespace, PoolName, SharedPool};

/// What a grant did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Grant {
    /// Granted (or granted already); the tenant's definitions version after it.
    Granted {
        /// The tenant's definitions version.
        version: u64,
    },
    /// There is no shared pool of that name.
    NoSuchPool,
    /// The tenant has a pool of its own by that name.
    OwnPool,
}

/// What deleting a shared pool did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SharedPoolDeleted {
    /// Deleted.
    Deleted,
    /// There was none.
    Missing,
    /// Still granted to these tenants: nothing was deleted.
    Granted(Vec<Namespace>),
}

/// Shared pools and their grants: edited by operators, read by every control plane's routing.
#[async_trait]
pub trait SharedPools: Send + Sync + 'static {
    /// Creates `pool` (its grants are not taken), or replaces the labels of the one of that
    /// name; whether it was new.
    async fn put_shared_pool(&self, pool: &SharedPool) -> StoreResult<bool>;

    /// Every shared pool with its grants, by name.
    async fn shared_pools(&self) -> StoreResult<Vec<SharedPool>>;

    /// Deletes shared pool `name` unless it is granted to a tenant.
    async fn delete_shared_pool(&self, name: &PoolName) -> StoreResult<SharedPoolDeleted>;

    /// Grants shared pool `name` to `tenant` at `now`, unless the tenant has a pool of its own
    /// by that name.
    async fn grant_pool(
        &self,
        name: &PoolName,
        tenant: &Namespace,
        now: Millis,
    ) -> StoreResult<Grant>;

    /// Takes shared pool `name` back from `tenant`; the tenant's definitions version after it,
    /// or `None` when it was not granted.
    async fn revoke_pool(&self, name: &PoolName, tenant: &Namespace) -> StoreResult<Option<u64>>;

    /// The shared pools granted to `tenant`, by name (their `grants` hold only `tenant`).
    async fn granted_pools(&self, tenant: &Namespace) -> StoreResult<Vec<SharedPool>>;
}
