//! Remote workflow turns (aviary wire §3): a run whose workflow this process does not have is
//! turned by a worker that announces it on the run's partition (the Python `durable-worker`,
//! say). The control plane keeps the run claimed, sends the worker the run's resolved history,
//! and applies the decision it returns exactly as it applies a turn computed here.
//!
//! The control plane itself decides what the worker cannot know: timers that are due fire, and
//! a buffered signal satisfies the wait it was sent for (`pendingSignals`).

use std::collections::HashSet;
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::awaiting::Pending;
use super::guard;
use crate::driver::routing;
use crate::driver::state::State;
use crate::model::{
    Checkpoint, CheckpointKind, CheckpointStatus, Millis, Namespace, Partition, Run, Scope,
    StepFailure,
};
use crate::runtime::{Command, Decision, DecisionStatus};
use crate::store::{History, TurnOutcome};
use crate::transport::naming::{partition_token, sanitize};

/// How long a worker may stay silent on a turn before it is sent again.
const SILENCE: Duration = Duration::from_secs(30);
/// Sends of one turn before the run is parked as having no worker.
const SENDS: usize = 3;

/// The versions of `workflow` that a live worker on `partition` runs turns of, ascending: a
/// run is sent to workers only if its own version is among them. None on a transport that
/// cannot send turns.
pub(crate) async fn served_versions(
    state: &State,
    workflow: &str,
    partition: &Partition,
) -> Vec<u32> {
    if state.transport.remote_turns().is_none() {
        return Vec::new();
    }
    let name = sanitize(workflow);
    let live = state
        .transport
        .worker_groups(&Scope::Only(partition.tenant().clone()))
        .await
        .map(|groups| groups.iter().any(|g| g.serves(&name, partition)))
        .unwrap_or(false);
    if !live {
        return Vec::new();
    }
    announced_versions(state, workflow, partition).await
}

/// The versions of `workflow` that the workers on its token on `partition` announce (wire §6.1 `registrations`; see [`crate::model::WorkerDescriptor::turn_versions`]),
/// ascending. Workers that announced no descriptor (older than the handshake, or not read yet)
/// state nothing: they are taken to run version 1, as convention routing always did.
pub(crate) async fn announced_versions(
    state: &State,
    workflow: &str,
    partition: &Partition,
) -> Vec<u32> {
    let token = partition_token(workflow, partition);
    let live = state
        .transport
        .worker_descriptors(&token)
        .await
        .unwrap_or_default();
    if live.is_empty() {
        return vec![1];
    }
    let mut versions: Vec<u32> = live
        .iter()
        .flat_map(|d| d.turn_versions(workflow))
        .collect();
    versions.sort_unstable();
    versions.dedup();
    versions
}

/// The decision of one remote turn of `run`, or how the run parks: until a worker serving its
/// workflow at the run's version is live when none is (or none answered, or each that took the
/// turn said it lacks that version), or for a recheck when the live ones all speak another
/// protocol (wire §6.4).
pub(crate) async fn turn(
    state: &State,
    run: &Run,
    history: History,
    now: Millis,
) -> Result<Decision, TurnOutcome> {
    let unserved = || TurnOutcome::Block {
        reason: StepFailure::new(format!(
            "no worker serves workflow `{}` version {} on `{}`; deploy a worker that registers it",
            run.workflow, run.workflow_version, run.namespace
        ))
        .with_code("no_worker"),
        recheck_at: None,
    };
    let Some(turns) = state.transport.remote_turns() else {
        return Err(unserved());
    };
    let definitions = state
        .definitions
        .of(&*state.store, &run.namespace)
        .await
        .ok();
    let rules = definitions
        .as_deref()
        .and_then(|d| d.rules.as_ref().map(|rules| (rules, d.version)));
    let target = crate::model::RouteTarget {
        workflow: &run.workflow,
        step: None,
        tags: &run.tags,
        attributes: &run.search_attributes,
        input: Some(&run.input),
    };
    let routed = routing::route(&run.namespace, None, rules, &target);
    if !served_versions(state, &run.workflow, &routed.partition)
        .await
        .contains(&run.workflow_version)
    {
        return Err(unserved());
    }
    let group = partition_token(&run.workflow, &routed.partition);
    if let Err(why) = guard::admits(state, &group, &[]).await {
        return Err(guard::park(&why, run.error.as_ref(), now, None));
    }
    let prepared = prepare(&history, &run.namespace, now);
    for _ in 0..SENDS {
        let task_id = format!(
            "{}:wf:{}",
            run.id,
            &uuid::Uuid::new_v4().simple().to_string()[..8]
        );
        let mut task = json!({
            "taskId": task_id,
            "runId": run.id,
            "workflow": run.workflow,
            "workflowVersion": run.workflow_version.to_string(),
            "input": run.input,
            "history": prepared.history,
            "group": group,
            "attempt": 1,
        });
        if !prepared.pending_signals.is_empty() {
            task["pendingSignals"] = Value::Array(prepared.pending_signals.clone());
        }
        let pending = state.awaiting.insert(task_id.clone(), run.id.clone());
        if let Err(e) = turns.dispatch_turn(task).await {
            state.awaiting.remove(&task_id);
            tracing::warn!(run_id = %run.id, error = %e, "sending a workflow turn failed");
            return Err(unserved());
        }
        match await_decision(pending).await {
            // Turns of every version share the workflow's queue: another worker may have it.
            Some(raw) if lacks_workflow(&raw) => {
                tracing::info!(run_id = %run.id, task_id, version = run.workflow_version, "the worker that took the turn lacks the run's version; sending it again");
            }
            Some(raw) => return Ok(decision(raw, &prepared, now)),
            None => {
                state.awaiting.remove(&task_id);
                tracing::warn!(run_id = %run.id, task_id, "no decision within the silence window; sending the turn again");
            }
        }
    }
    Err(unserved())
}

/// Whether a decision is a worker's refusal of a turn of a workflow (or version) it does not
/// have (`no_workflow`, wire §3.4) rather than the workflow failing: the run is not failed for
/// it, it waits for a worker that has it.
fn lacks_workflow(raw: &Value) -> bool {
    raw.get("status").and_then(Value::as_str) == Some("failed")
        && raw.pointer("/error/code").and_then(Value::as_str) == Some("no_workflow")
}

/// The decision for a sent turn, or `None` after [`SILENCE`] without one. Each run beat (the
/// worker is still replaying) restarts the window.
async fn await_decision(pending: Pending) -> Option<Value> {
    let Pending { mut answer, beat } = pending;
    loop {
        tokio::select! {
            got = &mut answer => return got.ok(),
            () = beat.notified() => continue,
            () = tokio::time::sleep(SILENCE) => return None,
        }
    }
}

/// A turn's history as the wire carries it, and what the control plane decided itself.
struct Prepared {
    /// The run's namespace: the partition its calls run on.
    namespace: Namespace,
    history: Vec<Value>,
    pending_signals: Vec<Value>,
    /// Commands the control plane adds: timers found due, buffered signals taken.
    own: Vec<Command>,
    /// Positions that already have a checkpoint (a worker re-emits pending ones; they are
    /// skipped).
    known: HashSet<u32>,
    /// The earliest pending timer that is not due yet.
    next_wake: Option<Millis>,
    /// Buffered signals no wait took (id, name), oldest first: a wait the worker adds in this
    /// turn takes the first of its name.
    untaken: Vec<(i64, String)>,
}

/// Builds the resolved history (wire §3.2) of `run` at `now`.
fn prepare(history: &History, namespace: &Namespace, now: Millis) -> Prepared {
    let mut out = Prepared {
        namespace: namespace.clone(),
        history: Vec::new(),
        pending_signals: Vec::new(),
        own: Vec::new(),
        known: HashSet::new(),
        next_wake: None,
        untaken: Vec::new(),
    };
    let mut taken = HashSet::new();
    let mut checkpoints: Vec<&Checkpoint> = history.checkpoints.iter().collect();
    checkpoints.sort_by_key(|c| c.seq);
    for cp in checkpoints {
        out.known.insert(cp.seq);
        let resolved = cp.status.is_resolved();
        let mut entry = Map::new();
        entry.insert("seq".into(), json!(cp.seq));
        let outcome = |entry: &mut Map<String, Value>| match (&cp.output, &cp.error, cp.status) {
            (_, Some(error), CheckpointStatus::Failed) => {
                entry.insert("error".into(), json!(error));
            }
            (output, _, _) => {
                entry.insert("output".into(), output.clone().unwrap_or(Value::Null));
            }
        };
        match cp.kind {
            CheckpointKind::LocalStep | CheckpointKind::SideEffect if resolved => {
                entry.insert("kind".into(), json!("step"));
                entry.insert("name".into(), json!(cp.name));
                outcome(&mut entry);
            }
            CheckpointKind::RemoteStep if resolved => {
                entry.insert("kind".into(), json!("call"));
                entry.insert("name".into(), json!(cp.name));
                outcome(&mut entry);
            }
            CheckpointKind::Sleep => {
                let due = cp.wake_at.is_some_and(|at| at <= now);
                if !resolved && !due {
                    out.next_wake = cp.wake_at.map(|at| out.next_wake.map_or(at, |w| w.min(at)));
                    continue;
                }
                if !resolved {
                    out.own.push(Command::FireTimer { seq: cp.seq });
                }
                entry.insert("kind".into(), json!("timer"));
                entry.insert("name".into(), json!(format!("sleep:{}", cp.seq)));
            }
            CheckpointKind::Signal if resolved => {
                entry.insert("kind".into(), json!("signal"));
                outcome(&mut entry);
            }
            CheckpointKind::Signal => {
                // A buffered signal of this name satisfies the wait: the worker learns it from
                // `pendingSignals`, the store from the command.
                if let Some(signal) = history
                    .signals
                    .iter()
                    .find(|s| s.name == cp.name && !taken.contains(&s.id))
                {
                    taken.insert(signal.id);
                    out.pending_signals.push(
                        json!({ "seq": cp.seq, "signal": cp.name, "payload": signal.payload }),
                    );
                    out.own.push(Command::ConsumeSignal {
                        seq: cp.seq,
                        signal: cp.name.clone(),
                        signal_id: signal.id,
                    });
                }
                continue;
            }
            CheckpointKind::Child if resolved => {
                entry.insert("kind".into(), json!("child"));
                outcome(&mut entry);
            }
            _ => continue,
        }
        out.history.push(Value::Object(entry));
    }
    out.untaken = history
        .signals
        .iter()
        .filter(|s| !taken.contains(&s.id))
        .map(|s| (s.id, s.name.clone()))
        .collect();
    out
}

/// A worker's decision as this engine applies it: the control plane's own commands first, then
/// the worker's, minus those for positions that already have a checkpoint.
fn decision(raw: Value, prepared: &Prepared, now: Millis) -> Decision {
    let bad = |why: String| Decision {
        status: DecisionStatus::Failed {
            error: StepFailure::new(format!("the worker's decision cannot be applied: {why}"))
                .with_code("bad_decision"),
        },
        commands: Vec::new(),
        next_wake: None,
    };
    let status = match raw.get("status").and_then(Value::as_str) {
        // A run cancelled during the turn is finished by the cancellation itself.
        Some("continue" | "cancelled") => DecisionStatus::Continue,
        Some("completed") => DecisionStatus::Completed {
            output: raw.get("output").cloned().unwrap_or(Value::Null),
        },
        Some("failed") => DecisionStatus::Failed {
            error: raw
                .get("error")
                .cloned()
                .and_then(|e| serde_json::from_value(e).ok())
                .unwrap_or_else(|| StepFailure::new("the workflow failed on its worker")),
        },
        other => return bad(format!("unknown status {other:?}")),
    };
    let mut commands = prepared.own.clone();
    let mut next_wake = prepared.next_wake;
    let mut untaken = prepared.untaken.clone();
    for mut command in raw
        .get("commands")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
    {
        // A position past `u32` is refused below with the command, never read as another.
        let seq = command
            .get("seq")
            .and_then(Value::as_u64)
            .and_then(|s| u32::try_from(s).ok());
        if seq.is_some_and(|seq| prepared.known.contains(&seq)) {
            continue;
        }
        if command.get("kind").and_then(Value::as_str) == Some("recordStep") {
            for field in ["startedAt", "finishedAt"] {
                if command.get(field).is_none() {
                    command[field] = json!(now);
                }
            }
        }
        match serde_json::from_value::<Command>(command.clone()) {
            Ok(
                c @ (Command::Call { .. }
                | Command::RecordStep { .. }
                | Command::Sleep { .. }
                | Command::WaitSignal { .. }
                | Command::StartChild { .. }),
            ) => {
                let group = command.get("group").and_then(Value::as_str).unwrap_or("");
                let mut c = c;
                if let Command::Call {
                    seq,
                    name,
                    input,
                    flow,
                    ..
                } = &mut c
                {
                    // A group naming a pool wins; one naming none leaves the pool our own
                    // workers' decisions carry (`pool`, an extension) as it is.
                    match routing::explicit_pool(group, &prepared.namespace) {
                        Ok(Some(pool)) => flow.pool = Some(pool),
                        Ok(None) => {}
                        Err(partition) => {
                            commands.push(Command::RefusedCall {
                                seq: *seq,
                                name: name.clone(),
                                input: input.clone(),
                                error: StepFailure::new(format!(
                                    "step `{name}` asked for partition `{partition}`, which is not its run's (`{tenant}`) nor one of its pools: a call runs on its run's partition, one of its pools (`{tenant}.<pool>`) or `default`; drop `group` or name one of those",
                                    tenant = prepared.namespace
                                ))
                                .with_code("foreign_partition")
                                .fatal(),
                            });
                            continue;
                        }
                    }
                }
                if let Command::Sleep { ms, .. } = &c {
                    let at = now.saturating_add(i64::try_from(*ms).unwrap_or(i64::MAX));
                    next_wake = Some(next_wake.map_or(at, |w| w.min(at)));
                }
                // A signal buffered before the workflow waited for it satisfies the wait at once
                // (wire §3.5): taken in the same write, and the run turns again so the worker
                // replays the wait resolved. Otherwise nothing would wake the run for it.
                if let Command::WaitSignal { seq, signal, .. } = &c
                    && let Some(i) = untaken.iter().position(|(_, name)| name == signal)
                {
                    let (signal_id, _) = untaken.remove(i);
                    commands.push(Command::ConsumeSignal {
                        seq: *seq,
                        signal: signal.clone(),
                        signal_id,
                    });
                    next_wake = Some(now);
                    continue;
                }
                commands.push(c);
            }
            _ => return bad(format!("unknown or malformed command {command}")),
        }
    }
    Decision {
        status,
        commands,
        next_wake,
    }
}

// Property tests of the decision decoder against anything a worker could send. They are built
// with the crate's test support only.
#[cfg(all(test, feature = "sqlite", feature = "test-util"))]
mod tests {
    use super::*;
    use crate::testing::{hostile_json, wire_object};
    use proptest::prelude::*;

    const DECISION: &[&str] = &["status", "commands", "output", "error", "taskId", "runId"];
    const COMMAND: &[&str] = &[
        "kind",
        "seq",
        "name",
        "input",
        "output",
        "error",
        "ms",
        "signal",
        "workflow",
        "startedAt",
        "finishedAt",
        "version",
        "id",
    ];

    /// A decision whose commands are objects shaped like commands, every field hostile.
    fn hostile_decision() -> impl Strategy<Value = Value> {
        (
            wire_object(DECISION),
            prop::collection::vec(wire_object(COMMAND), 0..6),
        )
            .prop_map(|(mut decision, commands)| {
                if decision.get("commands").is_none() {
                    decision["commands"] = Value::Array(commands);
                }
                decision
            })
    }

    /// A history with a resolved step at 0 and a pending one at 1.
    fn history() -> History {
        let cp = |seq: u32, status: &str| {
            serde_json::from_value::<Checkpoint>(json!({
                "run_id": "run-1", "seq": seq, "kind": "remote_step", "name": "charge",
                "status": status, "attempts": 1, "output": 1,
            }))
            .expect("a checkpoint")
        };
        History {
            checkpoints: vec![cp(0, "completed"), cp(1, "pending")],
            signals: Vec::new(),
        }
    }

    /// The decision's invariants (see the property below) on `raw`.
    fn applied_whole_or_refused_whole(raw: Value) -> Result<(), TestCaseError> {
        let prepared = prepare(&history(), &Namespace::default_ns(), 1_000);
        let applied = decision(raw, &prepared, 1_000);
        if let DecisionStatus::Failed { error } = &applied.status
            && error.code.as_deref() == Some("bad_decision")
        {
            prop_assert!(applied.commands.is_empty());
        }
        for command in &applied.commands {
            let seq = serde_json::to_value(command)
                .ok()
                .and_then(|c| c.get("seq").and_then(Value::as_u64));
            if let Some(seq) = seq {
                let seq = u32::try_from(seq).map_err(|_| TestCaseError::fail("a seq past u32"))?;
                prop_assert!(!prepared.known.contains(&seq), "{command:?}");
            }
        }
        Ok(())
    }

    /// Decisions that reach the edges, kept as a corpus run every time: positions past `u32`
    /// (one that would wrap onto a known one), timers past `i64`, a command of another kind, deep
    /// nesting, and statuses that are not strings.
    #[test]
    fn a_corpus_of_edge_decisions_is_applied_whole_or_refused_whole() {
        let corpus = [
            json!({"status": "continue", "commands": [{"kind": "call", "seq": 4_294_967_296u64, "name": "x", "input": null}]}),
            json!({"status": "continue", "commands": [{"kind": "call", "seq": 4_294_967_298u64, "name": "x", "input": null}]}),
            json!({"status": "continue", "commands": [{"kind": "sleep", "seq": 2, "ms": u64::MAX}]}),
            json!({"status": "continue", "commands": [{"kind": "sleep", "seq": 2, "ms": -1}]}),
            json!({"status": "continue", "commands": [{"kind": "fireTimer", "seq": 2}]}),
            json!({"status": "continue", "commands": [{"kind": "consumeSignal", "seq": 2, "signal": "a", "signalId": 1}]}),
            json!({"status": "completed", "output": (0..100).fold(json!(1), |v, _| json!([v]))}),
            json!({"status": 1, "commands": "none"}),
            json!({"status": null}),
            json!({"status": "failed", "error": {"message": 5}}),
            json!({"status": "continue", "commands": [{"kind": "recordStep", "seq": 2, "name": "\u{0}"}]}),
        ];
        for raw in corpus {
            applied_whole_or_refused_whole(raw.clone()).unwrap_or_else(|e| panic!("{raw}: {e}"));
        }
    }

    proptest! {
        /// Whatever a worker sends, the decision is applied whole or refused whole: a refusal
        /// carries no command, and nothing it keeps rewrites a position that has a checkpoint.
        #[test]
        fn a_decision_is_applied_whole_or_refused_whole(
            raw in prop_oneof![hostile_decision(), hostile_json()],
        ) {
            applied_whole_or_refused_whole(raw)?;
        }
    }
}
