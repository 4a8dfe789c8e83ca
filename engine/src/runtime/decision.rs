//! What one turn of a workflow decides, in the aviary `WorkflowDecision` shape (wire §3.4), so
//! a turn computed here and one computed by a remote worker are applied the same way.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::model::{Millis, RetryPolicy, RunId, Saga, StepFailure, StepFlow};

/// One thing the control plane must make durable after a turn.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Command {
    /// Dispatch a remote step.
    #[serde(rename_all = "camelCase")]
    Call {
        /// Position.
        seq: u32,
        /// Step name.
        name: String,
        /// Step input.
        input: Value,
        /// How failures are retried (an extension: absent on the aviary wire, where
        /// decision-issued calls are not retried).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        retry: Option<RetryPolicy>,
        /// How long one try may take (an extension: absent on the aviary wire).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        timeout_ms: Option<u64>,
        /// How its dispatches go out (extensions: on the aviary wire a requirement is
        /// declared with the step, and limits are not sent).
        #[serde(flatten)]
        flow: StepFlow,
        /// What undoes it, or which step it undoes (an extension: absent on the aviary wire).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        saga: Option<Saga>,
    },
    /// A worker's call that named another partition than its run's (wire §3.5 `call.group`):
    /// recorded failed at once and sent nowhere, so no step leaves its run's tenant. Not on
    /// the aviary wire.
    #[serde(rename_all = "camelCase")]
    RefusedCall {
        /// Position.
        seq: u32,
        /// Step name.
        name: String,
        /// Step input.
        input: Value,
        /// Why, naming the partition asked for.
        error: StepFailure,
    },
    /// A failed step's backoff has passed: dispatch it again. Not on the aviary wire.
    #[serde(rename_all = "camelCase")]
    RetryStep {
        /// Position.
        seq: u32,
        /// Step name.
        name: String,
        /// Step input.
        input: Value,
        /// The try this dispatch is (2 for the first retry).
        attempt: u32,
        /// How its dispatches go out, as its first try's.
        #[serde(flatten)]
        flow: StepFlow,
    },
    /// Record a step that already ran during the turn.
    #[serde(rename_all = "camelCase")]
    RecordStep {
        /// Position.
        seq: u32,
        /// Step name.
        name: String,
        /// Its output, when it succeeded.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output: Option<Value>,
        /// Its error, when it failed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<StepFailure>,
        /// When it started.
        started_at: Millis,
        /// When it finished.
        finished_at: Millis,
    },
    /// Start a durable timer of `ms` milliseconds (from the turn's start).
    #[serde(rename_all = "camelCase")]
    Sleep {
        /// Position.
        seq: u32,
        /// Duration.
        ms: u64,
    },
    /// Wait for signal `signal` (delivered by name to this run).
    #[serde(rename_all = "camelCase")]
    WaitSignal {
        /// Position.
        seq: u32,
        /// The signal name.
        signal: String,
        /// Give up after this long (an extension: absent on the aviary wire).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        timeout_ms: Option<u64>,
        /// Which deliveries the wait takes (an event's [`crate::model::EventFilter`]); kept
        /// as the wait's input. An extension: absent on the aviary wire.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        filter: Option<Value>,
    },
    /// A buffered signal satisfied the wait at `seq` during the turn. Not on the aviary wire.
    #[serde(rename_all = "camelCase")]
    ConsumeSignal {
        /// Position of the wait.
        seq: u32,
        /// The signal name.
        signal: String,
        /// The buffered signal taken.
        signal_id: i64,
    },
    /// The wait at `seq` timed out during the turn. Not on the aviary wire.
    #[serde(rename_all = "camelCase")]
    SignalTimedOut {
        /// Position of the wait.
        seq: u32,
    },
    /// The current try of the remote step at `seq` outlived its timeout. Not on the aviary wire.
    #[serde(rename_all = "camelCase")]
    StepTimedOut {
        /// Position of the step.
        seq: u32,
    },
    /// Start a child run `<run_id>.child.<seq>` of `workflow` (in the parent's namespace) and
    /// wait for it to end.
    #[serde(rename_all = "camelCase")]
    StartChild {
        /// Position.
        seq: u32,
        /// The child's workflow.
        workflow: String,
        /// The child's input.
        input: Value,
    },
    /// Cancel another run (a sibling child under fail-fast). Not on the aviary wire.
    #[serde(rename_all = "camelCase")]
    CancelRun {
        /// The run to cancel.
        id: RunId,
    },
    /// A pending timer found due during the turn: mark it fired. Not on the aviary wire: the
    /// control plane decides this itself when it builds a remote turn's history.
    #[serde(rename_all = "camelCase")]
    FireTimer {
        /// Position.
        seq: u32,
    },
}

/// How the turn left the workflow.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "lowercase")]
pub enum DecisionStatus {
    /// Blocked on durable operations; resume when one resolves.
    Continue,
    /// The workflow returned.
    Completed {
        /// Its output.
        output: Value,
    },
    /// The workflow failed.
    Failed {
        /// Why.
        error: StepFailure,
    },
    /// The workflow continues as a new run with this input (an extension: not on the aviary
    /// wire).
    #[serde(rename = "continuedAsNew")]
    ContinuedAsNew {
        /// The successor's input.
        input: Value,
    },
    /// The workflow failed, or was cancelled with compensation, and every compensation ran
    /// (an extension: not on the aviary wire).
    Compensated {
        /// Why it was compensated.
        error: StepFailure,
    },
    /// A compensation failed for good (an extension: not on the aviary wire).
    #[serde(rename = "compensationFailed")]
    CompensationFailed {
        /// Which compensation, and why.
        error: StepFailure,
    },
}

/// The result of one turn.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    /// Where the workflow is.
    #[serde(flatten)]
    pub status: DecisionStatus,
    /// What to persist, in order.
    pub commands: Vec<Command>,
    /// The earliest pending timer: when a suspended run must be looked at again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_wake: Option<Millis>,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::model::{Concurrency, RateLimit};

    /// The flow extensions sit beside the call's own fields, camelCased, and are left out when
    /// unset: an SDK's call, which has none of them, reads back with none.
    #[test]
    fn a_calls_flow_travels_flat_and_only_when_set() {
        let call = Command::Call {
            seq: 2,
            name: "charge".into(),
            input: json!({ "account": "a" }),
            retry: None,
            timeout_ms: None,
            flow: StepFlow {
                requires: vec!["gpu".into()],
                rate_limit: Some(RateLimit::per_minute(100)),
                concurrency: Some(Concurrency::at_most(2).per("/account")),
                priority: Some(5),
                pool: Some(crate::model::PoolName::parse("gpu").unwrap()),
            },
            saga: None,
        };
        let wire = serde_json::to_value(&call).unwrap();
        assert_eq!(wire["pool"], "gpu");
        assert_eq!(wire["kind"], "call");
        assert_eq!(wire["requires"], json!(["gpu"]));
        assert_eq!(wire["priority"], 5);
        assert!(wire.get("rateLimit").is_some() && wire.get("concurrency").is_some());
        assert_eq!(serde_json::from_value::<Command>(wire).unwrap(), call);

        let sdk = json!({ "kind": "call", "seq": 0, "name": "ship", "input": 1 });
        let Command::Call { flow, .. } = serde_json::from_value(sdk.clone()).unwrap() else {
            panic!("a call");
        };
        assert_eq!(flow, StepFlow::default());
        let bare = Command::Call {
            seq: 0,
            name: "ship".into(),
            input: json!(1),
            retry: None,
            timeout_ms: None,
            flow: StepFlow::default(),
            saga: None,
        };
        assert_eq!(serde_json::to_value(&bare).unwrap(), sdk);
    }
}
