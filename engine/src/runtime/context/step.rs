//! What a step handler is handed: where it is in its run, whether the run was cancelled, and
//! the tenant's connections it asks for by name.

use std::sync::{Arc, Mutex};

use crate::model::{Connection, ConnectionName, Namespace, RunId};
use crate::runtime::StepError;
use crate::runtime::cancel::Cancellations;
use crate::runtime::connections::ConnectionSource;
use crate::secrets::redact::Redactor;

/// Handed to every step handler.
#[derive(Clone, Debug)]
pub struct StepContext {
    /// The run the step belongs to.
    pub run_id: RunId,
    /// The step's position in the run.
    pub seq: u32,
    /// `<run_id>:<seq>`: identical on every delivery of this step; use it to make side effects
    /// idempotent.
    pub step_id: String,
    /// 1 on the first try.
    pub attempt: u32,
    /// The routing token the task came on.
    pub group: String,
    /// The tenant whose step this is (whose connections it reads).
    pub tenant: Namespace,
    pub(crate) cancellations: Arc<Cancellations>,
    pub(crate) connections: Option<Arc<dyn ConnectionSource>>,
    /// The secrets handed to this step so far: its result is redacted of them.
    pub(crate) received: Arc<Mutex<Redactor>>,
}

impl StepContext {
    /// Whether the step's run was cancelled while the step runs (the control plane broadcasts
    /// it). A long handler checks this, or awaits [`StepContext::cancelled`], to stop early;
    /// its result would be dropped anyway.
    pub fn is_cancelled(&self) -> bool {
        self.cancellations.is_cancelled(&self.run_id)
    }

    /// Resolves when the step's run is cancelled: `select!` it against long work.
    pub async fn cancelled(&self) {
        self.cancellations.wait(&self.run_id).await
    }

    /// The tenant's connection `name`, secrets included: the way a step gets a credential
    /// without it passing through its input, and so through every checkpoint, export and
    /// trace. Whatever this step then returns or fails with is redacted of the secrets it
    /// received before it is kept (`crate::secrets::redact` says what that cannot catch).
    ///
    /// Fails (without retrying when retrying cannot help) when the name is invalid, the
    /// tenant has no such connection, or this worker cannot read connections.
    pub async fn connection(&self, name: &str) -> Result<Connection, StepError> {
        let name = ConnectionName::parse(name)
            .map_err(|e| StepError::fatal(e.to_string()).with_code("bad_connection"))?;
        let Some(source) = &self.connections else {
            return Err(StepError::fatal(format!(
                "connection `{name}` cannot be read here: this worker was started without access to the tenant's connections; run the step on a worker that has it (a standalone server's embedded one, or `durable worker --tenant T` given the tenant's wire token, DURABLE_WIRE_TOKEN)"
            ))
            .with_code("connections_unavailable"));
        };
        let connection = source
            .connection(&self.tenant, &name)
            .await
            .map_err(StepError::from)?;
        self.received
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .add(connection.secrets().map(|(_, value)| value));
        Ok(connection)
    }
}
