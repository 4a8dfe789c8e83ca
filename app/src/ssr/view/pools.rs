//! Worker pools and routing rules through a [`SessionView`]: always the session user's tenant's
//! (an operator bound to no tenant: the engine's own namespace's), whatever the request says.

use std::collections::BTreeMap;

use durable::model::{
    Namespace, Pool, PoolName, PoolStatus, RoutePreview, RouteTarget, RoutingRules, SharedPool,
};
use durable::store::PoolPut;

use super::SessionView;
use crate::AppError;
use crate::ssr::engine_error;

impl SessionView {
    /// The tenant's pools, by name.
    pub async fn pools(&self) -> Result<Vec<Pool>, AppError> {
        let tenant = self.own_tenant();
        self.engine.pools(&tenant).await.map_err(engine_error)
    }

    /// Creates one of the tenant's pools, or replaces its labels.
    pub async fn put_pool(
        &self,
        name: PoolName,
        labels: BTreeMap<String, String>,
    ) -> Result<PoolPut, AppError> {
        let tenant = self.own_tenant();
        self.engine
            .put_pool(&tenant, name, labels)
            .await
            .map_err(engine_error)
    }

    /// Deletes one of the tenant's pools; whether it had it.
    pub async fn delete_pool(&self, name: &PoolName) -> Result<bool, AppError> {
        let tenant = self.own_tenant();
        self.engine
            .delete_pool(&tenant, name)
            .await
            .map_err(engine_error)
    }

    /// The tenant's pools with their live workers (and what those announced) and steps out.
    pub async fn pool_statuses(&self) -> Result<Vec<PoolStatus>, AppError> {
        let tenant = self.own_tenant();
        self.engine
            .pool_statuses(&tenant)
            .await
            .map_err(engine_error)
    }

    /// The tenant's routing rules (none until it sets some) and their version.
    pub async fn routing_rules(&self) -> Result<(Option<RoutingRules>, u64), AppError> {
        let tenant = self.own_tenant();
        self.engine
            .routing_rules(&tenant)
            .await
            .map_err(engine_error)
    }

    /// Replaces the tenant's routing rules; their new version.
    pub async fn put_routing_rules(&self, rules: RoutingRules) -> Result<u64, AppError> {
        let tenant = self.own_tenant();
        self.engine
            .put_routing_rules(&tenant, rules)
            .await
            .map_err(engine_error)
    }

    /// Where a send of `target` would go under the tenant's rules now.
    pub async fn preview_route(&self, target: &RouteTarget<'_>) -> Result<RoutePreview, AppError> {
        let tenant = self.own_tenant();
        self.engine
            .preview_route(&tenant, target)
            .await
            .map_err(engine_error)
    }

    /// Every shared pool with its grants. Operators only.
    pub async fn shared_pools(&self) -> Result<Vec<SharedPool>, AppError> {
        self.operator_only()?;
        self.engine.shared_pools().await.map_err(engine_error)
    }

    /// Creates a shared pool or replaces its labels; whether it was new. Operators only.
    pub async fn put_shared_pool(
        &self,
        name: PoolName,
        labels: BTreeMap<String, String>,
    ) -> Result<bool, AppError> {
        self.operator_only()?;
        tracing::info!(pool = %name, user = %self.user.email, "shared pool saved from the dashboard");
        let (_, created) = self
            .engine
            .put_shared_pool(name, labels)
            .await
            .map_err(engine_error)?;
        Ok(created)
    }

    /// Grants a shared pool to `tenant` (`revoke`: takes it back; whether it was granted).
    /// Operators only.
    pub async fn grant_shared_pool(
        &self,
        name: &PoolName,
        tenant: &Namespace,
        revoke: bool,
    ) -> Result<bool, AppError> {
        self.operator_only()?;
        tracing::info!(pool = %name, %tenant, revoke, user = %self.user.email, "shared pool grant changed from the dashboard");
        if revoke {
            self.engine
                .revoke_pool(name, tenant)
                .await
                .map_err(engine_error)
        } else {
            self.engine
                .grant_pool(name, tenant)
                .await
                .map_err(engine_error)?;
            Ok(true)
        }
    }

    /// Deletes a shared pool no tenant holds; whether there was one. Operators only.
    pub async fn delete_shared_pool(&self, name: &PoolName) -> Result<bool, AppError> {
        self.operator_only()?;
        self.engine
            .delete_shared_pool(name)
            .await
            .map_err(engine_error)
    }
}
