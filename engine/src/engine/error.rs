//! Why the engine refused or failed a request, in words the caller can act on.

use crate::model::{
    ConnectionError, ConnectionName, InputError, Limit, Millis, Namespace, PlanError, Run, RunId,
    ScheduleError, ScheduleId, UpdateId,
};
use crate::runtime::{HandlerError, HandlerKind};
use crate::secrets::SecretError;
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
    /// The request is over one of the server's input limits; nothing was changed. The message
    /// names the limit.
    #[error(transparent)]
    Input(#[from] InputError),
    /// The engine was already started.
    #[error("the engine is already running")]
    AlreadyStarted,
    /// The runtime stopped while the request was being carried out, which may have taken
    /// effect.
    #[error(
        "the engine shut down while starting the run, which may have started: list the runs (or start it with an id, which is refused if it exists) before trying again"
    )]
    ShuttingDown,
    /// A start (or a payload) is over the tenant's plan; nothing was started.
    #[error(transparent)]
    QuotaExceeded(#[from] QuotaExceeded),
    /// A plan an operator set makes no sense; nothing was changed.
    #[error(transparent)]
    BadPlan(#[from] PlanError),
    /// A schedule's cadence, time zone or id is wrong; nothing was changed.
    #[error(transparent)]
    BadSchedule(#[from] ScheduleError),
    /// The tenant already has a schedule under that id; nothing was changed.
    #[error("a schedule with id `{0}` already exists; change it (PATCH) or pick another id")]
    ScheduleExists(ScheduleId),
    /// The run's workflow registers no query (or update) of that name; nothing was changed.
    #[error(
        "workflow `{workflow}` registers no {} named `{name}`; {}",
        kind.as_str(),
        if known.is_empty() {
            format!("it registers no {} handler", kind.as_str())
        } else {
            format!("it registers: {}", known.join(", "))
        }
    )]
    NoHandler {
        /// Query or update.
        kind: HandlerKind,
        /// The name asked for.
        name: String,
        /// The run's workflow.
        workflow: String,
        /// The names it registers.
        known: Vec<String>,
    },
    /// The handler gave no reply: the argument does not fit, or the update was refused (nothing
    /// was kept).
    #[error(transparent)]
    Handler(HandlerError),
    /// The update id was used before, for another update of the run; nothing was changed.
    #[error(
        "update id `{id}` was already used for update `{name}` of this run; pick another id (or omit it)"
    )]
    UpdateIdTaken {
        /// The id.
        id: UpdateId,
        /// The update it was used for.
        name: String,
    },
    /// The run's workflow code is not registered in this process, so its handlers cannot be
    /// asked here.
    #[error(
        "workflow `{workflow}` version {version} is not registered in this process, so its queries and updates cannot be answered here; ask a server that registers it"
    )]
    CodeElsewhere {
        /// The workflow.
        workflow: String,
        /// Its version.
        version: u32,
    },
    /// The run already ended, so it takes no signal; nothing was changed.
    #[error("run {} already ended ({}); a finished run takes no signals", .0.id, .0.status)]
    RunEnded(Box<Run>),
    /// Replaying the run to answer found its history no longer matches the code.
    #[error("run {0} cannot be replayed to answer: {1}")]
    Replay(RunId, String),
    /// A connection is refused as given; nothing was changed.
    #[error(transparent)]
    BadConnection(#[from] ConnectionError),
    /// Connection `0` kept changing under this edit; nothing was changed.
    #[error("connection `{0}` was changed by other edits meanwhile; read it again and retry")]
    ConnectionEdited(ConnectionName),
    /// Sealing or opening a connection's secrets failed, or this server has no master key.
    #[error(transparent)]
    Secrets(#[from] SecretError),
}

/// A request over one of its tenant's ceilings: which, its value, and when to try again (for a
/// rate or queue ceiling, which frees by itself).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "tenant `{tenant}` is over its plan's `{limit}` ({ceiling}){}; an operator can raise it (durable tenant plan set {tenant} --{})",
    retry_after_ms.map(|ms| format!(": try again in {} s", (ms + 999) / 1000)).unwrap_or_default(),
    limit.field().replace('_', "-")
)]
pub struct QuotaExceeded {
    /// The tenant.
    pub tenant: Namespace,
    /// Which ceiling.
    pub limit: Limit,
    /// Its value.
    pub ceiling: u64,
    /// When a retry may succeed, in milliseconds; `None` when waiting does not help (a payload
    /// too large, a child too deep).
    pub retry_after_ms: Option<Millis>,
}

impl EngineError {
    /// Whether the request itself was wrong (the caller can fix it, and the message says how),
    /// as opposed to a failure on the engine's side: what every door answers as the caller's.
    pub fn is_callers(&self) -> bool {
        matches!(
            self,
            EngineError::UnknownWorkflow(..)
                | EngineError::BadInput(_)
                | EngineError::Input(_)
                | EngineError::RunExists(_)
                | EngineError::QuotaExceeded(_)
                | EngineError::BadPlan(_)
                | EngineError::BadSchedule(_)
                | EngineError::ScheduleExists(_)
                | EngineError::NoHandler { .. }
                | EngineError::Handler(HandlerError::Argument(_) | HandlerError::Refused { .. })
                | EngineError::UpdateIdTaken { .. }
                | EngineError::Store(StoreError::Refused(_))
                | EngineError::BadConnection(_)
        )
    }
}
