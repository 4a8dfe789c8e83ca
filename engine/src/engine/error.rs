//! Why the engine refused or failed a request, in words the caller can act on.

use crate::model::RunId;
use crate::store::StoreError;
use crate::transport::TransportError;

/// Why the engine refused or failed a request.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// No workflow of that name is registered.
    #[error("no workflow named `{0}` is registered; registered workflows: {1}")]
    UnknownWorkflow(String, String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The transport failed.
    #[error(transparent)]
    Transport(#[from] TransportError),
    /// A start chose the id of a run that exists (an idempotency key used before); nothing
    /// was started.
    #[error("a run with id `{0}` already exists; pick another id or omit it")]
    RunExists(RunId),
    /// The request itself is wrong (a blank workflow name, input the store cannot keep); nothing
    /// was changed. The message says what to fix.
    #[error("{0}")]
    BadInput(String),
    /// The engine was already started.
    #[error("the engine is already running")]
    AlreadyStarted,
    /// The runtime stopped while the request was being carried out, which may have taken
    /// effect.
    #[error(
        "the engine shut down while starting the run, which may have started: list the runs (or start it with an id, which is refused if it exists) before trying again"
    )]
    ShuttingDown,
}

impl EngineError {
    /// Whether the request itself was wrong (the caller can fix it, and the message says how),
    /// as opposed to a failure on the engine's side: what every door answers as the caller's.
    pub fn is_callers(&self) -> bool {
        matches!(
            self,
            EngineError::UnknownWorkflow(..) | EngineError::BadInput(_) | EngineError::RunExists(_)
        )
    }
}
