//! The worker's side of remote turns (aviary wire §3): a `WorkflowTask` in (its resolved
//! history as the wire spells it), the same replay a control plane runs locally, and a
//! `WorkflowDecision` out with only the commands the wire knows.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::turn::{TurnInput, run_turn};
use super::{Clock, Command, DecisionStatus, Registry};
use crate::model::{
    BufferedSignal, Checkpoint, CheckpointKind, CheckpointStatus, Heartbeat, RunId, StepFailure,
};
use crate::transport::Transport;
use crate::transport::naming::split_token;

/// How often a turn still replaying beats for its run (the Python worker's period).
const BEAT: Duration = Duration::from_secs(5);

/// Runs `turn` (the decision for `task`), beating for its run on the transport every [`BEAT`]
/// it takes, so the control plane keeps waiting instead of sending the turn again (wire §3.8).
/// A quick turn never beats.
pub async fn beating(
    transport: &dyn Transport,
    task: &Value,
    turn: impl Future<Output = Value>,
) -> Value {
    let beat = task
        .get("runId")
        .and_then(Value::as_str)
        .and_then(|id| RunId::parse(id).ok())
        .map(|run_id| Heartbeat {
            run_id,
            seq: 0,
            step_id: None,
            group: task
                .get("group")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
        });
    tokio::pin!(turn);
    let mut every = tokio::time::interval_at(tokio::time::Instant::now() + BEAT, BEAT);
    loop {
        tokio::select! {
            decision = &mut turn => return decision,
            _ = every.tick() => {
                if let Some(beat) = &beat
                    && let Err(e) = transport.publish_heartbeat(beat.clone()).await
                {
                    tracing::debug!(error = %e, "could not beat for a long turn");
                }
            }
        }
    }
}

/// The decision for one turn task; always an answer (a task it cannot run is `failed`).
pub async fn decide(registry: &Registry, clock: Arc<dyn Clock>, task: &Value) -> Value {
    let text = |k: &str| task.get(k).and_then(Value::as_str).unwrap_or_default();
    let (task_id, run_id, name) = (text("taskId"), text("runId"), text("workflow"));
    let failed = |error: StepFailure| json!({ "taskId": task_id, "runId": run_id, "status": "failed", "error": error, "commands": [] });
    // Exactly the run's version: another version's code would replay a history it did not
    // write. Only a task that names no version gets the newest.
    let version = text("workflowVersion").parse::<u32>().ok();
    let workflow = match version {
        Some(v) => registry.get(name, v),
        None => registry.latest(name),
    };
    let Some(workflow) = workflow else {
        let what = match version {
            Some(v) => format!("'{name}' version {v}"),
            None => format!("'{name}'"),
        };
        // The control plane sends the turn to another worker, or parks the run.
        return failed(
            StepFailure::new(format!("no workflow registered for {what}")).with_code("no_workflow"),
        );
    };
    let Ok(id) = RunId::parse(run_id) else {
        return failed(
            StepFailure::new(format!("`{run_id}` is not a run id")).with_code("bad_task"),
        );
    };
    let (_, partition) = split_token(text("group"));
    let history = task
        .get("history")
        .and_then(Value::as_array)
        .map(|entries| entries.iter().filter_map(|e| checkpoint(&id, e)).collect())
        .unwrap_or_default();
    let signals = task
        .get("pendingSignals")
        .and_then(Value::as_array)
        .map(|pending| {
            pending
                .iter()
                .enumerate()
                .filter_map(|(i, p)| {
                    Some(BufferedSignal {
                        id: i as i64,
                        name: p.get("signal")?.as_str()?.to_owned(),
                        payload: p.get("payload").cloned().unwrap_or(Value::Null),
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    let now = clock.now();
    let decision = run_turn(
        workflow,
        TurnInput {
            run_id: id,
            // The token's partition is the run's tenant's, or one of its pools.
            namespace: partition.tenant().clone(),
            input: task.get("input").cloned().unwrap_or(Value::Null),
            history,
            signals,
            now,
        },
        clock,
    )
    .await;
    // The control plane decides timers, signal deliveries and retries itself: only the
    // commands the wire knows go back.
    let commands: Vec<&Command> = decision
        .commands
        .iter()
        .filter(|c| {
            matches!(
                c,
                Command::Call { .. }
                    | Command::RecordStep { .. }
                    | Command::Sleep { .. }
                    | Command::WaitSignal { .. }
                    | Command::StartChild { .. }
            )
        })
        .collect();
    let mut out = json!({ "taskId": task_id, "runId": run_id, "commands": commands });
    match decision.status {
        DecisionStatus::Continue => out["status"] = json!("continue"),
        DecisionStatus::Completed { output } => {
            out["status"] = json!("completed");
            out["output"] = output;
        }
        // The wire's history carries no saga, so a remote turn never compensates; a decision
        // that says it did is reported as the failure it is.
        DecisionStatus::Failed { error }
        | DecisionStatus::Compensated { error }
        | DecisionStatus::CompensationFailed { error } => {
            out["status"] = json!("failed");
            out["error"] = json!(error);
        }
        DecisionStatus::ContinuedAsNew { .. } => {
            return failed(
                StepFailure::new("continue-as-new is not part of the remote turn protocol")
                    .with_code("unsupported"),
            );
        }
    }
    out
}

/// One wire history entry as the checkpoint a local replay reads. Signal and child entries
/// carry no name; the replay matches them by kind and position.
fn checkpoint(run_id: &RunId, entry: &Value) -> Option<Checkpoint> {
    let seq = u32::try_from(entry.get("seq")?.as_u64()?).ok()?;
    let name = entry
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let kind = match entry.get("kind")?.as_str()? {
        "step" => CheckpointKind::of_recorded(name),
        "call" => CheckpointKind::RemoteStep,
        "timer" => CheckpointKind::Sleep,
        "signal" => CheckpointKind::Signal,
        "child" => CheckpointKind::Child,
        _ => return None,
    };
    let error: Option<StepFailure> = entry
        .get("error")
        .cloned()
        .and_then(|e| serde_json::from_value(e).ok());
    Some(Checkpoint {
        run_id: run_id.clone(),
        seq,
        kind,
        name: name.to_owned(),
        status: if error.is_some() {
            CheckpointStatus::Failed
        } else {
            CheckpointStatus::Completed
        },
        attempts: 1,
        worker_group: None,
        input: None,
        output: entry.get("output").cloned(),
        error,
        wake_at: None,
        enqueued_at: None,
        started_at: None,
        finished_at: None,
        retry_policy: None,
        timeout_ms: None,
        priority: None,
        slot: None,
        saga: None,
        route: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::{SystemClock, WorkflowContext, WorkflowError};

    fn turn_task(version: &str) -> Value {
        json!({
            "taskId": "t1", "runId": RunId::generate(), "workflow": "greet",
            "workflowVersion": version, "input": null, "history": [], "group": "greet",
            "attempt": 1
        })
    }

    /// A worker runs a turn only on the run's own version; for one it lacks it says so, and the
    /// control plane does not take that for the workflow failing.
    #[tokio::test]
    async fn a_turn_runs_only_on_its_own_version() {
        let mut registry = Registry::new();
        registry.workflow("greet", 2, |_ctx: WorkflowContext, _: Value| async move {
            Ok::<_, WorkflowError>(json!("v2"))
        });
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let ran = decide(&registry, clock.clone(), &turn_task("2")).await;
        assert_eq!(ran["status"], "completed");
        assert_eq!(ran["output"], "v2");
        let refused = decide(&registry, clock, &turn_task("1")).await;
        assert_eq!(refused["status"], "failed");
        assert_eq!(refused["error"]["code"], "no_workflow");
        assert_eq!(
            refused["error"]["message"],
            "no workflow registered for 'greet' version 1"
        );
        assert_eq!(refused["commands"], json!([]));
    }

    // A property test of the worker's side against any turn task a control plane (or anyone
    // with access to the queue) could send. Built with the crate's test support only.
    #[cfg(all(feature = "sqlite", feature = "test-util"))]
    mod hostile {
        use super::*;
        use crate::testing::{hostile_json, wire_object};
        use proptest::prelude::*;

        const TASK: &[&str] = &[
            "taskId",
            "runId",
            "workflow",
            "workflowVersion",
            "input",
            "history",
            "group",
            "attempt",
            "pendingSignals",
        ];
        const EVENT: &[&str] = &["seq", "kind", "name", "output", "error"];

        /// A turn task of `greet`, every field hostile, its history made of event-shaped
        /// objects.
        fn hostile_task() -> impl Strategy<Value = Value> {
            (
                wire_object(TASK),
                prop::collection::vec(wire_object(EVENT), 0..6),
                prop::sample::select(vec!["greet", "nope", ""]),
            )
                .prop_map(|(mut task, history, workflow)| {
                    if task.get("history").is_none() {
                        task["history"] = Value::Array(history);
                    }
                    if task.get("workflow").is_none() {
                        task["workflow"] = json!(workflow);
                    }
                    task
                })
        }

        proptest! {
            /// Every task gets an answer in the decision shape, never a panic: a decision whose
            /// status the control plane knows, with a commands list.
            #[test]
            fn every_turn_task_gets_a_decision(task in prop_oneof![hostile_task(), hostile_json()]) {
                let mut registry = Registry::new();
                registry.workflow("greet", 1, |ctx: WorkflowContext, _: Value| async move {
                    let n: i64 = ctx.step("charge", &json!(1)).await?;
                    ctx.sleep(Duration::from_millis(5)).await;
                    Ok::<_, WorkflowError>(json!(n))
                });
                let clock: Arc<dyn Clock> = Arc::new(SystemClock);
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("runtime");
                let decision = runtime.block_on(decide(&registry, clock, &task));
                let status = decision["status"].as_str().unwrap_or_default();
                prop_assert!(
                    ["completed", "failed", "continue", "cancelled"].contains(&status),
                    "{decision}"
                );
                prop_assert!(decision["commands"].is_array(), "{decision}");
            }
        }
    }
}
