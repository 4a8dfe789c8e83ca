//! Worker pools and routing rules through a [`SessionView`]: always the session user's tenant's
//! (an operator bound to no tenant: the engine's own namespace's), whatever the request says.

use std::collections::BTreeMap;

use durable::model::{Pool, PoolName, RoutePreview, RouteTarget, RoutingRules};
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
}
