//! Schedules through a [`SessionView`]: always the session user's tenant's (an operator bound
//! to no tenant: the engine's own namespace, where its starts go too), whatever the request
//! says.

use durable::model::{Schedule, ScheduleId, SchedulePatch, ScheduleSpec, TickRecord};

use super::SessionView;
use crate::AppError;
use crate::ssr::engine_error;

/// The most schedules the page lists (a tenant keeps at most `max_schedules`).
const SHOWN: usize = 1_000;

impl SessionView {
    /// The tenant's schedules, by id.
    pub async fn schedules(&self) -> Result<Vec<Schedule>, AppError> {
        let tenant = self.own_tenant();
        let scope = durable::model::Scope::Only(tenant);
        self.engine
            .schedules(&scope, None, SHOWN)
            .await
            .map_err(engine_error)
    }

    /// One of the tenant's schedules.
    pub async fn schedule(&self, id: &ScheduleId) -> Result<Option<Schedule>, AppError> {
        let tenant = self.own_tenant();
        self.engine
            .schedule(&tenant, id)
            .await
            .map_err(engine_error)
    }

    /// Creates a schedule of the tenant's.
    pub async fn create_schedule(
        &self,
        id: ScheduleId,
        spec: ScheduleSpec,
    ) -> Result<Schedule, AppError> {
        let tenant = self.own_tenant();
        self.engine
            .create_schedule(&tenant, id, spec)
            .await
            .map_err(engine_error)
    }

    /// Changes one of the tenant's schedules.
    pub async fn update_schedule(
        &self,
        id: &ScheduleId,
        patch: &SchedulePatch,
    ) -> Result<Option<Schedule>, AppError> {
        let tenant = self.own_tenant();
        self.engine
            .update_schedule(&tenant, id, patch)
            .await
            .map_err(engine_error)
    }

    /// Deletes one of the tenant's schedules.
    pub async fn delete_schedule(&self, id: &ScheduleId) -> Result<bool, AppError> {
        let tenant = self.own_tenant();
        self.engine
            .delete_schedule(&tenant, id)
            .await
            .map_err(engine_error)
    }

    /// Fires one of the tenant's schedules now.
    pub async fn trigger_schedule(&self, id: &ScheduleId) -> Result<Option<TickRecord>, AppError> {
        let tenant = self.own_tenant();
        self.engine
            .trigger_schedule(&tenant, id)
            .await
            .map_err(engine_error)
    }
}
