use serde::{Deserialize, Serialize};

use super::{Millis, Namespace, RunId, RunStatus};

/// What happened to a run, in the aviary `EngineEvent.type` vocabulary.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TenantEventKind {
    /// A run was accepted.
    #[serde(rename = "run.started")]
    RunStarted,
    /// A run suspended (waiting on a step, timer, signal or child).
    #[serde(rename = "run.suspended")]
    RunSuspended,
    /// A run is executing a turn.
    #[serde(rename = "run.running")]
    RunRunning,
    /// A run is parked.
    #[serde(rename = "run.blocked")]
    RunBlocked,
    /// A run completed.
    #[serde(rename = "run.completed")]
    RunCompleted,
    /// A run failed, was cancelled or went dead.
    #[serde(rename = "run.failed")]
    RunFailed,
    /// A step finished.
    #[serde(rename = "step.completed")]
    StepCompleted,
    /// A step failed.
    #[serde(rename = "step.failed")]
    StepFailed,
}

impl TenantEventKind {
    /// The event that announces a run entering `status`.
    pub fn for_status(status: RunStatus) -> Self {
        match status {
            RunStatus::Pending => TenantEventKind::RunStarted,
            RunStatus::Running => TenantEventKind::RunRunning,
            RunStatus::Suspended => TenantEventKind::RunSuspended,
            RunStatus::Blocked => TenantEventKind::RunBlocked,
            RunStatus::Completed | RunStatus::Continued => TenantEventKind::RunCompleted,
            RunStatus::Cancelling
            | RunStatus::Failed
            | RunStatus::Cancelled
            | RunStatus::Dead
            | RunStatus::Compensated
            | RunStatus::CompensationFailed => TenantEventKind::RunFailed,
        }
    }
}

/// A lifecycle event of one run, published to its tenant only. The dashboard's live views and
/// the API's SSE stream are fed from these.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TenantEvent {
    /// What happened.
    #[serde(rename = "type")]
    pub kind: TenantEventKind,
    /// The run's tenant; events are routed by it and never cross it.
    pub namespace: Namespace,
    /// The run.
    pub run_id: RunId,
    /// The run's workflow.
    pub workflow: String,
    /// The run's status after the event.
    pub status: RunStatus,
    /// The step position, for step events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u32>,
    /// When it happened.
    pub at: Millis,
}
