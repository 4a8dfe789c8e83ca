use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{Checkpoint, ConcurrencySlot, Millis, Namespace, RunId, StepFailure};

/// Where a run is in its life. Terminal statuses never change again.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Accepted, not yet picked up by a driver.
    Pending,
    /// A driver holds its lease and is executing a turn.
    Running,
    /// Waiting on a timer, a signal, a child or a remote step.
    Suspended,
    /// Nobody can serve it (unknown version, no worker) or a quota parks it.
    Blocked,
    /// Cancel requested; in-flight work is being told.
    Cancelling,
    /// Finished with an output.
    Completed,
    /// Finished with an error.
    Failed,
    /// Cancelled.
    Cancelled,
    /// Given up after repeated failed recoveries.
    Dead,
    /// Ended by ContinueAsNew; a successor carries on.
    Continued,
    /// Failed, or cancelled with compensation, and every compensation of its completed steps
    /// ran, newest first.
    Compensated,
    /// Failed, or cancelled with compensation, and a compensation failed for good.
    CompensationFailed,
}

/// A status string that is not one of [`RunStatus::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown run status `{0}`: expected one of pending, running, suspended, blocked, cancelling, completed, failed, cancelled, dead, continued, compensated, compensation_failed"
)]
pub struct UnknownStatus(pub String);

impl RunStatus {
    /// Every status, in lifecycle order.
    pub const ALL: [RunStatus; 12] = [
        RunStatus::Pending,
        RunStatus::Running,
        RunStatus::Suspended,
        RunStatus::Blocked,
        RunStatus::Cancelling,
        RunStatus::Completed,
        RunStatus::Failed,
        RunStatus::Cancelled,
        RunStatus::Dead,
        RunStatus::Continued,
        RunStatus::Compensated,
        RunStatus::CompensationFailed,
    ];

    /// The lowercase name used in the store, the API and URLs.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Pending => "pending",
            RunStatus::Running => "running",
            RunStatus::Suspended => "suspended",
            RunStatus::Blocked => "blocked",
            RunStatus::Cancelling => "cancelling",
            RunStatus::Completed => "completed",
            RunStatus::Failed => "failed",
            RunStatus::Cancelled => "cancelled",
            RunStatus::Dead => "dead",
            RunStatus::Continued => "continued",
            RunStatus::Compensated => "compensated",
            RunStatus::CompensationFailed => "compensation_failed",
        }
    }

    /// Whether the run has ended for good.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            RunStatus::Completed
                | RunStatus::Failed
                | RunStatus::Cancelled
                | RunStatus::Dead
                | RunStatus::Continued
                | RunStatus::Compensated
                | RunStatus::CompensationFailed
        )
    }
}

impl fmt::Display for RunStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for RunStatus {
    type Err = UnknownStatus;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        RunStatus::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| UnknownStatus(s.chars().take(32).collect()))
    }
}

/// One execution of a workflow, as stored.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Run {
    /// Its id.
    pub id: RunId,
    /// The tenant it belongs to; never empty.
    pub namespace: Namespace,
    /// The registered workflow name.
    pub workflow: String,
    /// The workflow version the run is pinned to.
    pub workflow_version: u32,
    /// Current status.
    pub status: RunStatus,
    /// The input it was started with.
    pub input: Value,
    /// The output, once completed.
    pub output: Option<Value>,
    /// The error, once failed (or why it is blocked).
    pub error: Option<StepFailure>,
    /// Free-form labels for filtering.
    pub tags: Vec<String>,
    /// Flat scalar attributes for filtering.
    pub search_attributes: Map<String, Value>,
    /// The run that started this one as a child.
    pub parent_run_id: Option<RunId>,
    /// The top of this run's child tree (itself for a top-level run).
    pub root_run_id: RunId,
    /// 0 for a top-level run, parent's + 1 for a child.
    pub nesting_depth: u32,
    /// The run this one retries with edited input.
    pub retry_of: Option<RunId>,
    /// The run this one continues (ContinueAsNew).
    pub continued_from: Option<RunId>,
    /// How many times the run has been (re)started by a driver. It only grows: a turn's claim
    /// is fenced by it.
    pub attempt: u32,
    /// `attempt` when the run was last admitted (0 when created, its attempt then when retried):
    /// see [`Run::is_fresh`].
    #[serde(default)]
    pub admitted_attempt: u32,
    /// When a suspended run should be looked at again.
    pub wake_at: Option<Millis>,
    /// The driver holding the lease.
    pub locked_by: Option<String>,
    /// When that lease expires.
    pub locked_until: Option<Millis>,
    /// Creation time.
    pub created_at: Millis,
    /// Last change.
    pub updated_at: Millis,
    /// When it reached a terminal status.
    pub finished_at: Option<Millis>,
    /// The workflow concurrency limit it started under, if its workflow has one: it starts
    /// only while fewer than the limit of its workflow's runs with its key are running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<ConcurrencySlot>,
    /// When the run times out, if it was started with a timeout: past it, the run fails (code
    /// `run_timeout`) wherever it waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_at: Option<Millis>,
    /// The W3C `traceparent` its trace continues: every turn, step and signal of the run joins
    /// that trace. `None` when tracing was off when it started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
}

impl Run {
    /// Whether this is a top-level run admitted (started or retried) and not claimed since: the
    /// kind its tenant's concurrency ceiling and its workflow's concurrency limit hold queued.
    pub fn is_fresh(&self) -> bool {
        self.parent_run_id.is_none() && self.attempt == self.admitted_attempt
    }
}

/// A run with its checkpoints, for the detail views.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunDetail {
    /// The run.
    pub run: Run,
    /// Its checkpoints in `seq` order.
    pub checkpoints: Vec<Checkpoint>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_round_trip_through_strings() {
        for st in RunStatus::ALL {
            assert_eq!(st.as_str().parse::<RunStatus>().unwrap(), st);
            assert_eq!(
                serde_json::to_value(st).unwrap(),
                Value::String(st.as_str().into())
            );
        }
        assert!("done".parse::<RunStatus>().is_err());
    }

    #[test]
    fn run_ids_are_checked() {
        assert!(RunId::parse("run_0190abc").is_ok());
        assert!(RunId::parse("run_1.child.3").is_ok());
        assert!(RunId::parse("").is_err());
        assert!(RunId::parse("../etc/passwd").is_err());
        assert!(RunId::parse("a b").is_err());
        assert!(RunId::parse("' OR 1=1 --").is_err());
    }
}
