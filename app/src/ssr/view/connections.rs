//! Connections through a [`SessionView`]: always the session user's tenant's, whatever the
//! request says; their secret values never come back through here.

use durable::model::{ConnectionInfo, ConnectionName, ConnectionSpec};

use super::SessionView;
use crate::AppError;
use crate::ssr::engine_error;

impl SessionView {
    /// The tenant's connections, by name, without their secret values.
    pub async fn connections(&self) -> Result<Vec<ConnectionInfo>, AppError> {
        let tenant = self.own_tenant();
        self.engine.connections(&tenant).await.map_err(engine_error)
    }

    /// One of the tenant's connections, without its secret values.
    pub async fn connection(
        &self,
        name: &ConnectionName,
    ) -> Result<Option<ConnectionInfo>, AppError> {
        let tenant = self.own_tenant();
        self.engine
            .connection(&tenant, name)
            .await
            .map_err(engine_error)
    }

    /// Creates one of the tenant's connections or changes it (secrets merged); whether it was
    /// new.
    pub async fn put_connection(
        &self,
        name: ConnectionName,
        spec: ConnectionSpec,
    ) -> Result<bool, AppError> {
        let tenant = self.own_tenant();
        let saved = self
            .engine
            .put_connection(&tenant, name, spec)
            .await
            .map_err(engine_error)?;
        Ok(saved.created)
    }

    /// Deletes one of the tenant's connections; whether it had it.
    pub async fn delete_connection(&self, name: &ConnectionName) -> Result<bool, AppError> {
        let tenant = self.own_tenant();
        self.engine
            .delete_connection(&tenant, name)
            .await
            .map_err(engine_error)
    }
}
