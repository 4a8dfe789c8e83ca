//! Where a step's connections come from: a [`ConnectionSource`] the worker is given. The
//! engine's reads the tenant's sealed connection through its store and opens it with the
//! tenant's data key; a worker without one answers every ask with a failure that says so.

use async_trait::async_trait;

use crate::model::{Connection, ConnectionName, Namespace, StepFailure};

/// Resolves a tenant's connections for its steps.
#[async_trait]
pub trait ConnectionSource: Send + Sync + std::fmt::Debug + 'static {
    /// Connection `name` of `tenant`, secrets opened; a failure the step fails with.
    async fn connection(
        &self,
        tenant: &Namespace,
        name: &ConnectionName,
    ) -> Result<Connection, StepFailure>;
}
