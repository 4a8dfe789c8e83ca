use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Millis, RetryPolicy, RunId, StepFailure};

/// What a checkpoint records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckpointKind {
    /// A step executed in the driving process.
    LocalStep,
    /// A step dispatched through the transport to `name@partition`.
    RemoteStep,
    /// A durable timer.
    Sleep,
    /// A signal wait.
    Signal,
    /// A child run.
    Child,
    /// A captured `now()` or side effect.
    SideEffect,
}

/// The name of the checkpoint `WorkflowContext::upsert_search_attributes` records.
pub const ATTRIBUTES_MARKER: &str = "durable.searchAttributes";

/// The name of `WorkflowContext::patched`'s markers: `durable.patch.<id>`.
pub const PATCH_MARKER: &str = "durable.patch.";

impl CheckpointKind {
    /// What a value a turn recorded by name is: a side effect (a captured `now()`, a
    /// `side_effect`, one of the engine's markers) or a local step's result. One rule for the
    /// store and for a worker reading the wire's history, so replays agree.
    pub fn of_recorded(name: &str) -> CheckpointKind {
        if name.starts_with("now#")
            || name == "sideEffect"
            || name == ATTRIBUTES_MARKER
            || name.starts_with(PATCH_MARKER)
        {
            CheckpointKind::SideEffect
        } else {
            CheckpointKind::LocalStep
        }
    }

    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            CheckpointKind::LocalStep => "local_step",
            CheckpointKind::RemoteStep => "remote_step",
            CheckpointKind::Sleep => "sleep",
            CheckpointKind::Signal => "signal",
            CheckpointKind::Child => "child",
            CheckpointKind::SideEffect => "side_effect",
        }
    }

    /// Parses a stored name.
    pub fn parse(raw: &str) -> Option<Self> {
        [
            CheckpointKind::LocalStep,
            CheckpointKind::RemoteStep,
            CheckpointKind::Sleep,
            CheckpointKind::Signal,
            CheckpointKind::Child,
            CheckpointKind::SideEffect,
        ]
        .into_iter()
        .find(|k| k.as_str() == raw)
    }
}

/// Where a checkpoint is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CheckpointStatus {
    /// Recorded, waiting to run or for its result.
    Pending,
    /// A worker picked it up.
    Running,
    /// Done with an output.
    Completed,
    /// Done with an error.
    Failed,
}

impl CheckpointStatus {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            CheckpointStatus::Pending => "pending",
            CheckpointStatus::Running => "running",
            CheckpointStatus::Completed => "completed",
            CheckpointStatus::Failed => "failed",
        }
    }

    /// Parses a stored name.
    pub fn parse(raw: &str) -> Option<Self> {
        match raw {
            "pending" => Some(CheckpointStatus::Pending),
            "running" => Some(CheckpointStatus::Running),
            "completed" => Some(CheckpointStatus::Completed),
            "failed" => Some(CheckpointStatus::Failed),
            _ => None,
        }
    }

    /// Whether replay can hand back a recorded value.
    pub fn is_resolved(self) -> bool {
        matches!(self, CheckpointStatus::Completed | CheckpointStatus::Failed)
    }
}

/// One durable record per side effect, keyed `(run_id, seq)`. `seq` is the deterministic
/// position of the operation in the workflow body.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// The run it belongs to.
    pub run_id: RunId,
    /// Position in the workflow body.
    pub seq: u32,
    /// What it records.
    pub kind: CheckpointKind,
    /// The step name (or a synthetic name such as `sleep:<seq>`).
    pub name: String,
    /// Where it is.
    pub status: CheckpointStatus,
    /// How many times it was tried.
    pub attempts: u32,
    /// The routing token a remote step went to (`name@partition`).
    pub worker_group: Option<String>,
    /// The input handed to the step.
    pub input: Option<Value>,
    /// The recorded output.
    pub output: Option<Value>,
    /// The recorded error.
    pub error: Option<StepFailure>,
    /// When a timer or a retry is due.
    pub wake_at: Option<Millis>,
    /// When it was dispatched.
    pub enqueued_at: Option<Millis>,
    /// When a worker started it.
    pub started_at: Option<Millis>,
    /// When it resolved.
    pub finished_at: Option<Millis>,
    /// How a failed remote step is retried.
    #[serde(default)]
    pub retry_policy: Option<RetryPolicy>,
    /// How long one try of a remote step may take before it counts as failed (`timeout`).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// A remote step's priority among its step's waiting tasks, kept for a dispatch sent again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i64>,
    /// The concurrency slots a remote step's dispatch holds while it is out (see
    /// [`crate::runtime::StepOptions::concurrency`]): given back when its result comes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot: Option<String>,
    /// What undoes this step, or which step this one undoes (see [`super::Saga`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saga: Option<super::Saga>,
    /// Where a remote step or turn was routed and what decided it (`worker_group` is the token
    /// it went to).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route: Option<super::StepRoute>,
}
