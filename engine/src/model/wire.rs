//! Step messages exactly as the aviary wire spells them (camelCase JSON, optional fields
//! omitted), so the in-process and Redis transports carry the same values.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Millis, Receipt, RunId};

/// A step handed to a worker (`P-tasks-<token>`, job `task`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RemoteTask {
    /// The run the step belongs to.
    pub run_id: RunId,
    /// The step's position in the run.
    pub seq: u32,
    /// The unsanitized handler name.
    pub name: String,
    /// `<run_id>:<seq>`: the idempotency key handlers should honour.
    pub step_id: String,
    /// The routing token the task was queued on.
    pub group: String,
    /// The step input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Value>,
    /// Opaque context for the handler (carries the tenant, and the `traceparent` again: the
    /// Python SDK hands its handlers only this).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<Value>,
    /// The W3C trace context of the turn that sent it, when tracing is on: the worker's span of
    /// the step continues that trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
    /// 1 on the first try.
    pub attempt: u32,
    /// Where the result goes: the results queue of the control plane that sent the task, so
    /// the control plane that holds the run's history in memory applies its result. A wire
    /// extension: our workers honour it, the SDK workers ignore it and answer on the shared
    /// results queue, which every control plane consumes too. Set by a transport that routes
    /// results this way (Redis); the engine leaves it empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<String>,
    /// Its priority among the waiting tasks of its step (higher goes first; a task without one
    /// goes before any with one, as in BullMQ); on Redis it becomes the BullMQ job's priority
    /// (wire §2), which the SDK workers honour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i64>,
    /// The broker's hold on the task while a worker runs it: settled once its result is
    /// published, so a worker that dies first leaves the task to be taken again.
    #[serde(skip)]
    pub receipt: Receipt,
}

/// A step's error, as the wire and the store carry it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepFailure {
    /// What went wrong, for a person.
    pub message: String,
    /// A stable machine code (`non_determinism`, `no_handler`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// `Some(false)` means do not retry; absent means retryable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retryable: Option<bool>,
    /// Structured details.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
}

impl StepFailure {
    /// A failure with only a message.
    pub fn new(message: impl Into<String>) -> Self {
        StepFailure {
            message: message.into(),
            code: None,
            retryable: None,
            details: None,
        }
    }

    /// Adds a machine code.
    pub fn with_code(mut self, code: impl Into<String>) -> Self {
        self.code = Some(code.into());
        self
    }

    /// Marks the failure as not worth retrying.
    pub fn fatal(mut self) -> Self {
        self.retryable = Some(false);
        self
    }

    /// The wire's retry rule: retryable unless `retryable == false`.
    pub fn is_retryable(&self) -> bool {
        self.retryable != Some(false)
    }
}

impl std::fmt::Display for StepFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.code {
            Some(code) => write!(f, "{} ({code})", self.message),
            None => f.write_str(&self.message),
        }
    }
}

/// How a step ended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "lowercase")]
pub enum StepOutcome {
    /// It returned an output.
    Completed {
        /// The output (JSON `null` when the handler returned nothing).
        #[serde(default)]
        output: Value,
    },
    /// It failed.
    Failed {
        /// Why.
        error: StepFailure,
    },
}

/// A step's wire id, `<runId>:<seq>`: what a task carries as `stepId`, and what its result and
/// beats must echo.
pub fn step_id(run_id: &RunId, seq: u32) -> String {
    format!("{run_id}:{seq}")
}

/// A worker's answer to a [`RemoteTask`] (`P-results`, job `result`), correlated by
/// `(runId, seq)`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StepResult {
    /// The run.
    pub run_id: RunId,
    /// The step's position.
    pub seq: u32,
    /// Echo of the task's `stepId`.
    pub step_id: String,
    /// When the worker picked the task up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Millis>,
    /// The outcome.
    #[serde(flatten)]
    pub outcome: StepOutcome,
    /// The broker's hold on the result while the control plane applies it: settled once the
    /// result is checkpointed (or found late), so a control plane that dies first leaves it to
    /// a peer.
    #[serde(skip)]
    pub receipt: Receipt,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_python_failure_result_parses() {
        let raw = r#"{"runId":"run-abc","seq":1,"stepId":"run-abc:1","startedAt":1795939520882,"status":"failed",
            "error":{"message":"card declined","code":"declined","retryable":false,"details":{"reason":"nsf"}},
            "events":[]}"#;
        let res: StepResult = serde_json::from_str(raw).unwrap();
        match res.outcome {
            StepOutcome::Failed { error } => {
                assert_eq!(error.code.as_deref(), Some("declined"));
                assert!(!error.is_retryable());
            }
            other => panic!("expected a failure, got {other:?}"),
        }
    }

    #[test]
    fn a_completed_result_round_trips_in_wire_shape() {
        let res = StepResult {
            run_id: RunId::parse("run-abc").unwrap(),
            seq: 0,
            step_id: "run-abc:0".into(),
            started_at: None,
            outcome: StepOutcome::Completed {
                output: serde_json::json!({"ok": true}),
            },
            receipt: Default::default(),
        };
        let json = serde_json::to_value(&res).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"runId":"run-abc","seq":0,"stepId":"run-abc:0","status":"completed","output":{"ok":true}})
        );
    }
}

/// A broadcast on the control channel (`P-control`, wire §2.5): every process hears every
/// message and drops its own echo by `from`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ControlMessage {
    /// The sending instance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// What it says.
    #[serde(flatten)]
    pub notice: ControlNotice,
}

/// What a control message says.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum ControlNotice {
    /// The run was cancelled: its in-flight steps should stop, and a turn replaying it bails.
    #[serde(rename_all = "camelCase")]
    Cancel {
        /// The cancelled run.
        run_id: RunId,
    },
    /// Work was queued for the run (informational; workers ignore it).
    #[serde(rename_all = "camelCase")]
    Enqueued {
        /// The run.
        run_id: RunId,
    },
    /// A step event (progress) from a worker, passed through as sent.
    Event {
        /// The event.
        event: Value,
    },
}

/// A liveness beat on `P-heartbeat` (wire §2.6). With `stepId` it is about one step; without,
/// the worker is still replaying a turn of the run (the Python worker beats every 5 s), so the
/// control plane keeps waiting for its decision instead of sending the turn again.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Heartbeat {
    /// The run.
    pub run_id: RunId,
    /// The step's position (0 on a run-scoped beat).
    #[serde(default)]
    pub seq: u32,
    /// The step, on a step-scoped beat.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_id: Option<String>,
    /// The routing token of the worker that beats.
    #[serde(default)]
    pub group: String,
}

#[cfg(test)]
mod heartbeat_tests {
    use super::*;

    #[test]
    fn a_python_run_beat_parses_and_an_adonis_beat_keeps_its_step() {
        let py: Heartbeat =
            serde_json::from_str(r#"{"runId":"run-s","seq":0,"group":"slow"}"#).unwrap();
        assert_eq!(py.run_id.as_str(), "run-s");
        assert_eq!(py.step_id, None);
        let adonis: Heartbeat = serde_json::from_str(
            r#"{"runId":"run-s","seq":2,"stepId":"run-s:2","group":"charge@acme","at":1,"progress":0.5}"#,
        )
        .unwrap();
        assert_eq!(adonis.step_id.as_deref(), Some("run-s:2"));
    }
}
