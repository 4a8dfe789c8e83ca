//! The API's one door to the runs: a [`TenantView`], extracted from every API request and built
//! in exactly one place ([`TenantViews::build`]) from the verified bearer token's tenant. It
//! holds that tenant's store view and the engine, both private, and offers the reads and verbs
//! the API handlers use with `Scope::Only(tenant)` fixed; a handler never sees the engine, so it
//! cannot read or act outside the token's tenant by accident.

use axum::extract::{FromRef, FromRequestParts};
use axum::http::request::Parts;
use std::collections::BTreeMap;

use durable::model::{
    Checkpoint, ConnectionInfo, ConnectionName, ConnectionSpec, EventOutcome, Namespace, Plan,
    Pool, PoolName, PoolStatus, PublishedEvent, RoutingRules, Run, RunDetail, RunId, RunPage,
    RunQuery, Schedule, ScheduleId, SchedulePatch, ScheduleSpec, Scope, SharedPool, TickRecord,
    UpdateId, Usage,
};
use durable::store::{PoolPut, ScopedStore, SignalSent, StoreResult};
use durable::{ConnectionSaved, Control, Engine, EngineError, StartRun, UpdateOutcome};
use serde_json::Value;

use crate::auth::{ApiTokens, Operator, bearer_tenant};
use crate::error::ApiError;

#[cfg(test)]
mod tests;

/// The API's door to the engine, kept in the server state: the only thing that turns a verified
/// tenant into a [`TenantView`]. It hands the engine to nobody else.
#[derive(Clone)]
pub struct TenantViews {
    engine: Engine,
}

impl TenantViews {
    /// The door over `engine`, wired once by the server when it starts.
    pub fn new(engine: Engine) -> Self {
        TenantViews { engine }
    }

    /// The only place an API store view is built: `tenant` is the verified token's, never a
    /// value from the URL, query or body.
    fn build(&self, tenant: Namespace) -> TenantView {
        TenantView {
            reads: ScopedStore::new(self.engine.store().clone(), tenant.clone()),
            tenant,
            engine: self.engine.clone(),
        }
    }
}

/// The runs one API request may reach: the bearer token's tenant's, read through its store view
/// and acted on with its scope fixed. Another tenant's run answers exactly like a missing one.
pub struct TenantView {
    tenant: Namespace,
    reads: ScopedStore,
    engine: Engine,
}

impl<S: Send + Sync> FromRequestParts<S> for TenantView
where
    ApiTokens: FromRef<S>,
    TenantViews: FromRef<S>,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let tenant = bearer_tenant(parts, &ApiTokens::from_ref(state)).await?;
        Ok(TenantViews::from_ref(state).build(tenant))
    }
}

impl TenantView {
    /// What this view sees: the token's tenant only (for its live event stream).
    pub fn scope(&self) -> &Scope {
        self.reads.scope()
    }

    /// What one request may carry (list filters are checked against it).
    pub fn limits(&self) -> &durable::model::InputLimits {
        self.engine.limits()
    }

    /// A page of the tenant's runs matching `query`.
    pub async fn list_runs(&self, query: &RunQuery) -> StoreResult<RunPage> {
        self.reads.list_runs(query).await
    }

    /// One of the tenant's runs.
    pub async fn get_run(&self, id: &RunId) -> StoreResult<Option<Run>> {
        self.reads.get_run(id).await
    }

    /// One of the tenant's runs' checkpoints (none for another tenant's run).
    pub async fn checkpoints(&self, id: &RunId) -> StoreResult<Vec<Checkpoint>> {
        self.reads.checkpoints(id).await
    }

    /// One of the tenant's runs with its checkpoints: what a run's page and its exported
    /// history are made of.
    pub async fn detail(&self, id: &RunId) -> StoreResult<Option<RunDetail>> {
        let Some(run) = self.get_run(id).await? else {
            return Ok(None);
        };
        let checkpoints = self.checkpoints(id).await?;
        Ok(Some(RunDetail { run, checkpoints }))
    }

    /// Starts `req` in the token's tenant; any namespace `req` names is replaced.
    pub async fn start_run(&self, req: StartRun) -> Result<Run, EngineError> {
        let req = StartRun {
            namespace: Some(self.tenant.clone()),
            ..req
        };
        self.engine.start_run(req).await
    }

    /// Signal-with-start in the tenant: signals run `req.id`, starting it first (stamped with
    /// the tenant) if it does not exist; the run and whether it was started.
    pub async fn signal_with_start(
        &self,
        req: StartRun,
        name: &str,
        payload: Value,
    ) -> Result<(Run, bool), EngineError> {
        let req = StartRun {
            namespace: Some(self.tenant.clone()),
            ..req
        };
        self.engine
            .signal_with_start(self.scope(), req, name, payload)
            .await
    }

    /// Publishes `event` to the tenant.
    pub async fn publish(&self, event: PublishedEvent) -> Result<EventOutcome, EngineError> {
        self.engine.publish(self.scope(), event).await
    }

    /// Sends signal `name` with `payload` to run `id`, if it is the tenant's.
    pub async fn signal(
        &self,
        id: &RunId,
        name: &str,
        payload: Value,
    ) -> Result<SignalSent, EngineError> {
        self.engine.signal(self.scope(), id, name, payload).await
    }

    /// Asks run `id`, if it is the tenant's, query `name` with `argument`.
    pub async fn query(
        &self,
        id: &RunId,
        name: &str,
        argument: Value,
    ) -> Result<Option<Value>, EngineError> {
        self.engine.query(self.scope(), id, name, argument).await
    }

    /// Sends run `id`, if it is the tenant's, update `name` with `argument`, kept under
    /// `update_id` (a fresh id when `None`).
    pub async fn update(
        &self,
        id: &RunId,
        name: &str,
        argument: Value,
        update_id: Option<UpdateId>,
    ) -> Result<UpdateOutcome, EngineError> {
        self.engine
            .update(self.scope(), id, name, argument, update_id)
            .await
    }

    /// Cancels run `id`, if it is the tenant's.
    pub async fn cancel(&self, id: &RunId) -> Result<Control, EngineError> {
        self.engine.cancel(self.scope(), id).await
    }

    /// Cancels run `id` with compensation, if it is the tenant's.
    pub async fn cancel_compensating(&self, id: &RunId) -> Result<Control, EngineError> {
        self.engine.cancel_compensating(self.scope(), id).await
    }

    /// Re-drives a failed or dead run of the tenant from its last good checkpoint.
    pub async fn retry(&self, id: &RunId) -> Result<Control, EngineError> {
        self.engine.retry(self.scope(), id).await
    }

    /// Drives a blocked run of the tenant again now.
    pub async fn continue_run(&self, id: &RunId) -> Result<Control, EngineError> {
        self.engine.continue_run(self.scope(), id).await
    }

    /// Sends a tenant's run's waiting remote steps again now; with how many went out.
    pub async fn redispatch(&self, id: &RunId) -> Result<(Control, usize), EngineError> {
        self.engine.redispatch(self.scope(), id).await
    }

    /// Starts a new run of one of the tenant's runs' workflow with edited `input`.
    pub async fn retry_with_input(&self, id: &RunId, input: Value) -> Result<Control, EngineError> {
        self.engine.retry_with_input(self.scope(), id, input).await
    }

    /// Creates a schedule of the tenant's.
    pub async fn create_schedule(
        &self,
        id: ScheduleId,
        spec: ScheduleSpec,
    ) -> Result<Schedule, EngineError> {
        self.engine.create_schedule(&self.tenant, id, spec).await
    }

    /// One of the tenant's schedules.
    pub async fn schedule(&self, id: &ScheduleId) -> Result<Option<Schedule>, EngineError> {
        self.engine.schedule(&self.tenant, id).await
    }

    /// The tenant's schedules by id, the first `limit` after `after`.
    pub async fn schedules(
        &self,
        after: Option<&ScheduleId>,
        limit: usize,
    ) -> Result<Vec<Schedule>, EngineError> {
        let after = after.map(|id| (self.tenant.as_str(), id));
        self.engine.schedules(self.scope(), after, limit).await
    }

    /// Changes one of the tenant's schedules.
    pub async fn update_schedule(
        &self,
        id: &ScheduleId,
        patch: &SchedulePatch,
    ) -> Result<Option<Schedule>, EngineError> {
        self.engine.update_schedule(&self.tenant, id, patch).await
    }

    /// Deletes one of the tenant's schedules.
    pub async fn delete_schedule(&self, id: &ScheduleId) -> Result<bool, EngineError> {
        self.engine.delete_schedule(&self.tenant, id).await
    }

    /// Fires one of the tenant's schedules now.
    pub async fn trigger_schedule(
        &self,
        id: &ScheduleId,
    ) -> Result<Option<TickRecord>, EngineError> {
        self.engine.trigger_schedule(&self.tenant, id).await
    }

    /// Creates one of the tenant's pools, or changes its labels.
    pub async fn put_pool(
        &self,
        name: PoolName,
        labels: BTreeMap<String, String>,
    ) -> Result<PoolPut, EngineError> {
        self.engine.put_pool(&self.tenant, name, labels).await
    }

    /// Deletes one of the tenant's pools; whether it had it.
    pub async fn delete_pool(&self, name: &PoolName) -> Result<bool, EngineError> {
        self.engine.delete_pool(&self.tenant, name).await
    }

    /// Creates one of the tenant's connections, or changes it (secrets merged).
    pub async fn put_connection(
        &self,
        name: ConnectionName,
        spec: ConnectionSpec,
    ) -> Result<ConnectionSaved, EngineError> {
        self.engine.put_connection(&self.tenant, name, spec).await
    }

    /// The tenant's connections, without their secret values.
    pub async fn connections(&self) -> Result<Vec<ConnectionInfo>, EngineError> {
        self.engine.connections(&self.tenant).await
    }

    /// One of the tenant's connections, without its secret values.
    pub async fn connection(
        &self,
        name: &ConnectionName,
    ) -> Result<Option<ConnectionInfo>, EngineError> {
        self.engine.connection(&self.tenant, name).await
    }

    /// Deletes one of the tenant's connections; whether it had it.
    pub async fn delete_connection(&self, name: &ConnectionName) -> Result<bool, EngineError> {
        self.engine.delete_connection(&self.tenant, name).await
    }

    /// Replaces the tenant's routing rules; its definitions version after it.
    pub async fn put_routing_rules(&self, rules: RoutingRules) -> Result<u64, EngineError> {
        self.engine.put_routing_rules(&self.tenant, rules).await
    }

    /// The tenant's routing rules and the definitions version they are at.
    pub async fn routing_rules(&self) -> Result<(Option<RoutingRules>, u64), EngineError> {
        self.engine.routing_rules(&self.tenant).await
    }

    /// The tenant's pools with their live workers and steps out.
    pub async fn pool_statuses(&self) -> Result<Vec<PoolStatus>, EngineError> {
        self.engine.pool_statuses(&self.tenant).await
    }

    /// The tenant's pool `name` with its live workers and steps out, if it has one.
    pub async fn pool_status(&self, name: &PoolName) -> Result<Option<PoolStatus>, EngineError> {
        let pool = self.engine.pools(&self.tenant).await?;
        let Some(pool) = pool.into_iter().find(|p| &p.name == name) else {
            return Ok(None);
        };
        Ok(Some(self.engine.pool_status(&self.tenant, pool).await))
    }

    /// `pool`, just saved, with its live workers and steps out.
    pub async fn saved_pool_status(&self, pool: Pool) -> PoolStatus {
        self.engine.pool_status(&self.tenant, pool).await
    }

    /// The plan the tenant is held to, and what it uses of it.
    pub async fn plan(&self) -> Result<(Plan, Usage), EngineError> {
        let plan = self.engine.effective_plan(&self.tenant).await;
        Ok((plan, self.engine.usage(&self.tenant).await?))
    }
}

impl TenantViews {
    /// The plans desk, for a request proven to carry the operator token.
    pub fn plans(&self, _operator: &Operator) -> PlanDesk {
        PlanDesk {
            engine: self.engine.clone(),
        }
    }

    /// The shared pools desk, for a request proven to carry the operator token.
    pub fn shared_pools(&self, _operator: &Operator) -> SharedPoolDesk {
        SharedPoolDesk {
            engine: self.engine.clone(),
        }
    }
}

/// The operator's shared pools: created, granted to tenants, taken back, deleted.
pub struct SharedPoolDesk {
    engine: Engine,
}

impl SharedPoolDesk {
    /// Every shared pool with its grants.
    pub async fn list(&self) -> Result<Vec<SharedPool>, EngineError> {
        self.engine.shared_pools().await
    }

    /// Creates a shared pool or replaces its labels; whether it was new.
    pub async fn put(
        &self,
        name: PoolName,
        labels: BTreeMap<String, String>,
    ) -> Result<(SharedPool, bool), EngineError> {
        self.engine.put_shared_pool(name, labels).await
    }

    /// Deletes a shared pool no tenant holds; whether there was one.
    pub async fn delete(&self, name: &PoolName) -> Result<bool, EngineError> {
        self.engine.delete_shared_pool(name).await
    }

    /// Grants a shared pool to `tenant` (named in the operator's URL: the operator may act on
    /// every tenant).
    pub async fn grant(&self, name: &PoolName, tenant: &Namespace) -> Result<(), EngineError> {
        self.engine.grant_pool(name, tenant).await
    }

    /// Takes a shared pool back from `tenant`; whether it was granted.
    pub async fn revoke(&self, name: &PoolName, tenant: &Namespace) -> Result<bool, EngineError> {
        self.engine.revoke_pool(name, tenant).await
    }
}

/// Every tenant's plan, for the operator: read, set, and usage beside it.
pub struct PlanDesk {
    engine: Engine,
}

impl PlanDesk {
    /// The plan set for `tenant` (`None`: the default), the one it is held to, and (for a
    /// tenant) its usage.
    pub async fn get(
        &self,
        tenant: Option<&Namespace>,
    ) -> Result<(Plan, Plan, Option<Usage>), EngineError> {
        let own = self.engine.plan(tenant).await?;
        match tenant {
            None => Ok((own.clone(), own, None)),
            Some(tenant) => {
                let effective = self.engine.effective_plan(tenant).await;
                let usage = self.engine.usage(tenant).await?;
                Ok((own, effective, Some(usage)))
            }
        }
    }

    /// Sets the plan of `tenant` (`None`: the default).
    pub async fn set(&self, tenant: Option<&Namespace>, plan: Plan) -> Result<(), EngineError> {
        self.engine.set_plan(tenant, plan).await
    }
}
