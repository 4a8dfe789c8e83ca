//! Plans through a [`SessionView`]: the operator reads and sets every tenant's plan (and the
//! default) with each tenant's usage beside it; a tenant's user reads its own; a queued run's
//! page says when its tenant's concurrency ceiling holds it back.

use durable::model::{Namespace, Plan, Role, Run, RunStatus, Scope};

use super::SessionView;
use crate::ssr::engine_error;
use crate::{AppError, PlanRow, QuotaHold};

impl SessionView {
    /// Every tenant's plan row (the default first, then each tenant with a plan or with runs),
    /// for the operator screen. Operators only.
    pub async fn plan_rows(&self, tenants: &[Namespace]) -> Result<Vec<PlanRow>, AppError> {
        self.operator_only()?;
        let set = self.engine.plans().await.map_err(engine_error)?;
        let default = set
            .iter()
            .find(|(t, _)| t.is_none())
            .map(|(_, p)| p.clone())
            .unwrap_or_default();
        let mut names: Vec<Namespace> = set.iter().filter_map(|(t, _)| t.clone()).collect();
        names.extend(tenants.iter().filter(|t| !t.is_default()).cloned());
        names.sort();
        names.dedup();
        let mut rows = vec![PlanRow {
            tenant: None,
            own: default.clone(),
            effective: default.clone(),
            usage: None,
        }];
        for tenant in names {
            let own = set
                .iter()
                .find(|(t, _)| t.as_ref() == Some(&tenant))
                .map(|(_, p)| p.clone())
                .unwrap_or_default();
            let usage = self.engine.usage(&tenant).await.map_err(engine_error)?;
            rows.push(PlanRow {
                effective: own.over(&default),
                own,
                usage: Some(usage),
                tenant: Some(tenant),
            });
        }
        Ok(rows)
    }

    /// Sets `tenant`'s plan (`None`: the default). Operators only.
    pub async fn set_plan(&self, tenant: Option<&Namespace>, plan: Plan) -> Result<(), AppError> {
        self.operator_only()?;
        tracing::info!(tenant = ?tenant.map(Namespace::as_str), user = %self.user.email, ?plan, "plan set from the dashboard");
        self.engine
            .set_plan(tenant, plan)
            .await
            .map_err(engine_error)
    }

    /// The session's tenant's plan in force and its usage; `None` for an operator.
    pub async fn own_plan(&self) -> Result<Option<PlanRow>, AppError> {
        let Scope::Only(tenant) = self.scope() else {
            return Ok(None);
        };
        let effective = self.engine.effective_plan(tenant).await;
        let usage = self.engine.usage(tenant).await.map_err(engine_error)?;
        Ok(Some(PlanRow {
            tenant: Some(tenant.clone()),
            own: effective.clone(),
            effective,
            usage: Some(usage),
        }))
    }

    /// Why `run` (visible to this view) waits queued: a top-level run not yet started while
    /// its tenant is at its concurrency ceiling, or its workflow's runs with its key at their
    /// limit.
    pub async fn quota_hold(&self, run: &Run) -> Result<Option<QuotaHold>, AppError> {
        if run.status != RunStatus::Pending || !run.is_fresh() {
            return Ok(None);
        }
        let plan = self.engine.effective_plan(&run.namespace).await;
        if let Some(ceiling) = plan.max_concurrent_runs {
            let usage = self
                .engine
                .usage(&run.namespace)
                .await
                .map_err(engine_error)?;
            if usage.running >= u64::from(ceiling) {
                return Ok(Some(QuotaHold::Tenant {
                    ceiling,
                    running: usage.running,
                    queued: usage.queued,
                }));
            }
        }
        let Some(slot) = &run.concurrency else {
            return Ok(None);
        };
        let running = self
            .engine
            .running_with_key(&run.namespace, &run.workflow, &slot.key)
            .await
            .map_err(engine_error)?;
        Ok((running >= u64::from(slot.limit)).then(|| QuotaHold::Key {
            workflow: run.workflow.clone(),
            key: slot.key.clone(),
            limit: slot.limit,
            running,
        }))
    }

    pub(super) fn operator_only(&self) -> Result<(), AppError> {
        if self.user.role == Role::Operator && self.user.tenant.is_none() {
            Ok(())
        } else {
            Err(AppError::Forbidden)
        }
    }
}
