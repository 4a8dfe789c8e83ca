//! Tenants' plans, for operators: read, set and see usage. A tenant reads its own usage through
//! [`Engine::usage`] with its verified tenant; setting a plan is an operator's act, which the
//! doors (API, dashboard, CLI) check before calling here.

use super::{Engine, EngineError};
use crate::model::{Namespace, Plan, Usage};

impl Engine {
    /// The default plan (`None`) and every tenant's own, as set.
    pub async fn plans(&self) -> Result<Vec<(Option<Namespace>, Plan)>, EngineError> {
        Ok(self.state.store.plans().await?)
    }

    /// The plan set for `tenant` (`None`: the default plan), as set, not merged.
    pub async fn plan(&self, tenant: Option<&Namespace>) -> Result<Plan, EngineError> {
        let plans = self.plans().await?;
        Ok(plans
            .into_iter()
            .find(|(t, _)| t.as_ref() == tenant)
            .map(|(_, plan)| plan)
            .unwrap_or_default())
    }

    /// The plan `tenant` is held to: its own over the default.
    pub async fn effective_plan(&self, tenant: &Namespace) -> Plan {
        let state = &self.state;
        state.plans.current(&*state.store).await.of(tenant)
    }

    /// Sets `tenant`'s plan (`None`: the default plan). In force on this engine at once, and on
    /// other control planes within a second.
    pub async fn set_plan(
        &self,
        tenant: Option<&Namespace>,
        plan: Plan,
    ) -> Result<(), EngineError> {
        plan.validate()?;
        let state = &self.state;
        state
            .store
            .put_plan(tenant, &plan, state.clock.now())
            .await?;
        state.plans.forget();
        // A raised ceiling may let queued runs start now.
        state.wake.notify_one();
        Ok(())
    }

    /// What `tenant` uses now, beside its ceilings.
    pub async fn usage(&self, tenant: &Namespace) -> Result<Usage, EngineError> {
        let state = &self.state;
        Ok(state.store.usage(tenant, state.clock.now()).await?)
    }

    /// How many runs of `tenant`'s `workflow` with concurrency key `key` are running: what a
    /// queued run under that workflow's limit waits on.
    pub async fn running_with_key(
        &self,
        tenant: &Namespace,
        workflow: &str,
        key: &str,
    ) -> Result<u64, EngineError> {
        Ok(self
            .state
            .store
            .started_with_key(tenant, workflow, key)
            .await?)
    }
}
