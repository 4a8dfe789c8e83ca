//! Operators' shared pools: created, granted to tenants and taken back, each grant in force on
//! every control plane before it answers (a tenant's definitions changed). A tenant lists the
//! pools granted to it among its own and routes to them by name.

use std::collections::{BTreeMap, BTreeSet};

use super::{Engine, EngineError};
use crate::model::{LabelError, Namespace, PoolName, SharedPool, check_labels};
use crate::store::{Grant, SharedPoolDeleted};

impl Engine {
    /// Creates shared pool `name` with `labels`, or replaces the labels of the one there is;
    /// the pool and whether it was new.
    pub async fn put_shared_pool(
        &self,
        name: PoolName,
        labels: BTreeMap<String, String>,
    ) -> Result<(SharedPool, bool), EngineError> {
        check_labels(&labels).map_err(|e: LabelError| EngineError::BadInput(e.to_string()))?;
        let now = self.state.clock.now();
        let pool = SharedPool {
            name,
            labels,
            grants: BTreeSet::new(),
            created_at: now,
            updated_at: now,
        };
        let created = self.state.store.put_shared_pool(&pool).await?;
        let stored = self
            .shared_pools()
            .await?
            .into_iter()
            .find(|p| p.name == pool.name)
            .unwrap_or(pool);
        Ok((stored, created))
    }

    /// Every shared pool with the tenants it is granted to, by name.
    pub async fn shared_pools(&self) -> Result<Vec<SharedPool>, EngineError> {
        Ok(self.state.store.shared_pools().await?)
    }

    /// Deletes shared pool `name`; whether there was one. Refused while it is granted.
    pub async fn delete_shared_pool(&self, name: &PoolName) -> Result<bool, EngineError> {
        match self.state.store.delete_shared_pool(name).await? {
            SharedPoolDeleted::Deleted => Ok(true),
            SharedPoolDeleted::Missing => Ok(false),
            SharedPoolDeleted::Granted(tenants) => {
                let tenants: Vec<String> = tenants.iter().map(ToString::to_string).collect();
                Err(EngineError::BadInput(format!(
                    "shared pool `{name}` is granted to {}: take it back from each first (durable pool revoke {name} --tenant NAME)",
                    tenants.join(", ")
                )))
            }
        }
    }

    /// Grants shared pool `name` to `tenant`: its steps can be routed there, to a queue of its
    /// own that the pool's workers take from fairly. Refused for a pool that does not exist, or
    /// whose name is one of the tenant's own pools.
    pub async fn grant_pool(&self, name: &PoolName, tenant: &Namespace) -> Result<(), EngineError> {
        let now = self.state.clock.now();
        match self.state.store.grant_pool(name, tenant, now).await? {
            Grant::Granted { version } => {
                self.announce_definitions(tenant, version).await;
                self.publish_grants(name).await;
                Ok(())
            }
            Grant::NoSuchPool => Err(EngineError::BadInput(format!(
                "there is no shared pool `{name}`: create it first (PUT /api/v1/shared-pools/{name}, or durable pool put --shared {name})"
            ))),
            Grant::OwnPool => Err(EngineError::BadInput(format!(
                "tenant `{tenant}` has a pool of its own named `{name}`; the tenant must delete or rename it before this shared pool can be granted"
            ))),
        }
    }

    /// Takes shared pool `name` back from `tenant`; whether it was granted. Refused while one
    /// of the tenant's routing rules names it. Steps already sent there stay in the tenant's
    /// queue of the pool.
    pub async fn revoke_pool(
        &self,
        name: &PoolName,
        tenant: &Namespace,
    ) -> Result<bool, EngineError> {
        if let Some(rules) = self.state.store.routing_rules(tenant).await?
            && let Some(at) = rules
                .rules
                .iter()
                .position(|r| r.pool == name.as_str() || r.fallback.iter().any(|f| f == name))
        {
            return Err(EngineError::BadInput(format!(
                "routing rule {} of tenant `{tenant}` names pool `{name}`: the tenant changes its rules before the pool is taken back",
                at + 1
            )));
        }
        let revoked = self.state.store.revoke_pool(name, tenant).await?;
        if let Some(version) = revoked {
            self.announce_definitions(tenant, version).await;
            self.publish_grants(name).await;
        }
        Ok(revoked.is_some())
    }

    /// Tells pool `name`'s workers its grants now (the control planes' loop does it again
    /// every few seconds, so a failure here only delays it).
    async fn publish_grants(&self, name: &PoolName) {
        let state = &self.state;
        let pools = match state.store.shared_pools().await {
            Ok(pools) => pools,
            Err(e) => {
                tracing::warn!(error = %e, pool = %name, "could not read the shared pool to publish its grants; the next round does");
                return;
            }
        };
        let pool = pools
            .into_iter()
            .find(|p| &p.name == name)
            .unwrap_or(SharedPool {
                name: name.clone(),
                labels: BTreeMap::new(),
                grants: BTreeSet::new(),
                created_at: 0,
                updated_at: 0,
            });
        if let Err(e) = crate::driver::loops::shared_pools::publish(state, &pool).await {
            tracing::warn!(error = %e, pool = %name, "could not publish the shared pool's grants; the next round does");
        }
    }
}
