//! A tenant's worker pools: created, changed and deleted by the tenant (through its verified
//! door), each edit bumping the tenant's definitions version, and listed with the partition each
//! pool's workers serve.

use std::collections::BTreeMap;

use super::{Engine, EngineError};
use crate::model::{LabelError, Namespace, Pool, PoolName, check_labels};
use crate::store::PoolPut;

impl Engine {
    /// Creates pool `name` of `tenant` with `labels`, or replaces the labels of the one it has.
    /// Refused past the tenant's plan (`max_pools`), or with labels that break the rules.
    pub async fn put_pool(
        &self,
        tenant: &Namespace,
        name: PoolName,
        labels: BTreeMap<String, String>,
    ) -> Result<PoolPut, EngineError> {
        check_labels(&labels).map_err(|e: LabelError| EngineError::BadInput(e.to_string()))?;
        let state = &self.state;
        let now = state.clock.now();
        let pool = Pool {
            tenant: tenant.clone(),
            name,
            labels,
            created_at: now,
            updated_at: now,
        };
        let allowed = self.effective_plan(tenant).await.pools_allowed();
        let put = state.store.put_pool(&pool, allowed).await?;
        state.definitions.forget(tenant);
        Ok(put)
    }

    /// The pools of `tenant`, by name.
    pub async fn pools(&self, tenant: &Namespace) -> Result<Vec<Pool>, EngineError> {
        Ok(self.state.store.pools(tenant).await?)
    }

    /// Deletes pool `name` of `tenant`; whether there was one. Steps already sent to it stay in
    /// its queue for its workers.
    pub async fn delete_pool(
        &self,
        tenant: &Namespace,
        name: &PoolName,
    ) -> Result<bool, EngineError> {
        let deleted = self.state.store.delete_pool(tenant, name).await?.is_some();
        self.state.definitions.forget(tenant);
        Ok(deleted)
    }
}
