//! A turn's commit: the workflow's decision becomes the durable commit (checkpoints, timers
//! fired, signals consumed, children and successors to insert, the run's outcome) and the tasks
//! to send once it commits. Pure: no store, no transport, no clock.

use super::guard::Outgoing;
use serde_json::{Map, Value};

use crate::driver::dead_letter::dead_letter_run;
use crate::driver::definitions::TenantDefinitions;
use crate::driver::routing;
use crate::model::{
    ATTRIBUTES_MARKER, CheckpointKind, CheckpointStatus, InputLimits, Plan, RemoteTask,
    RouteTarget, RoutingRules, Run, RunId, RunStatus, StepFailure, StepFlow, step_id,
};
use crate::runtime::{Command, Decision, DecisionStatus, Registry, child_run_id};
use crate::store::{NewCheckpoint, NewRun, Redispatch, TurnCommit, TurnOutcome};
use crate::transport::naming::partition_token;

/// Turns a decision into the durable commit and the tasks to dispatch after it, within the
/// tenant's `plan`. A child deeper than its `max_nesting_depth` is not started: it fails at
/// once, and the parent sees that failure on its next turn. A priority over its `max_priority`
/// is lowered to it. Search attributes the run set over `limits`
/// fail it, naming the limit, and nothing it asked for leaves. A call naming a pool the
/// tenant does not have (`definitions`, read when a call names one) fails at once, naming the
/// fix.
pub(crate) fn commit_of(
    run: &Run,
    decision: Decision,
    now: i64,
    registry: &Registry,
    plan: &Plan,
    limits: &InputLimits,
    definitions: Option<&TenantDefinitions>,
) -> (TurnCommit, Vec<Outgoing>) {
    // A child or call refused here resolved at once: the run turns again to see it failed.
    let mut refused_here = false;
    let rules = definitions.and_then(|d| d.rules.as_ref().map(|rules| (rules, d.version)));
    let max_depth = plan.max_nesting_depth;
    let mut checkpoints = Vec::with_capacity(decision.commands.len());
    let mut fired_timers = Vec::new();
    let mut redispatched = Vec::new();
    let mut consumed_signals = Vec::new();
    let mut timed_out_signals = Vec::new();
    let mut timed_out_steps = Vec::new();
    let mut children = Vec::new();
    let mut cancel_runs = Vec::new();
    let mut search_attributes = None;
    let mut tasks = Vec::new();
    for command in decision.commands {
        match command {
            Command::Call {
                seq,
                name,
                input,
                retry,
                timeout_ms,
                flow,
                saga,
            } => {
                if let (Some(pool), Some(definitions)) = (&flow.pool, definitions)
                    && !definitions.pools.contains(pool)
                {
                    let error = StepFailure::new(format!(
                        "step `{name}` names pool `{pool}`, which tenant `{tenant}` does not have: create it (PUT /api/v1/pools/{pool}, or durable pool put --tenant {tenant} {pool}) or name another",
                        tenant = run.namespace
                    ))
                    .with_code("unknown_pool")
                    .fatal();
                    checkpoints.push(refused_call(seq, name, input, error, now));
                    refused_here = true;
                    continue;
                }
                let out = within(
                    plan,
                    outgoing(run, seq, name.clone(), input.clone(), 1, flow, rules),
                );
                checkpoints.push(NewCheckpoint {
                    retry_policy: retry,
                    timeout_ms,
                    priority: out.task.priority,
                    saga,
                    route: out.route.clone(),
                    ..NewCheckpoint::remote_step(seq, name, out.task.group.clone(), input, now)
                });
                tasks.push(out);
            }
            Command::RefusedCall {
                seq,
                name,
                input,
                error,
            } => {
                checkpoints.push(refused_call(seq, name, input, error, now));
                // Resolved already: the workflow turns again at once to see it failed.
                refused_here = true;
            }
            Command::RecordStep {
                seq,
                name,
                output,
                error,
                started_at,
                finished_at,
            } => {
                if name == ATTRIBUTES_MARKER
                    && let Some(Value::Object(set)) = &output
                {
                    let merged =
                        search_attributes.get_or_insert_with(|| run.search_attributes.clone());
                    for (key, value) in set {
                        if value.is_null() {
                            merged.remove(key);
                        } else {
                            merged.insert(key.clone(), value.clone());
                        }
                    }
                }
                checkpoints.push(NewCheckpoint::recorded_step(
                    seq,
                    name,
                    output,
                    error,
                    started_at,
                    finished_at,
                ));
            }
            Command::Sleep { seq, ms } => checkpoints.push(NewCheckpoint {
                seq,
                kind: CheckpointKind::Sleep,
                name: format!("sleep:{seq}"),
                status: CheckpointStatus::Pending,
                worker_group: None,
                input: None,
                output: None,
                error: None,
                wake_at: Some(now.saturating_add(i64::try_from(ms).unwrap_or(i64::MAX))),
                enqueued_at: None,
                started_at: Some(now),
                finished_at: None,
                retry_policy: None,
                timeout_ms: None,
                priority: None,
                slot: None,
                saga: None,
                route: None,
            }),
            Command::FireTimer { seq } => fired_timers.push(seq),
            Command::CancelRun { id } => cancel_runs.push(id),
            Command::RetryStep {
                seq,
                name,
                input,
                attempt,
                flow,
            } => {
                let out = within(plan, outgoing(run, seq, name, input, attempt, flow, rules));
                redispatched.push(Redispatch {
                    seq,
                    worker_group: out.task.group.clone(),
                    route: out.route.clone(),
                });
                tasks.push(out);
            }
            Command::WaitSignal {
                seq,
                signal,
                timeout_ms,
                filter,
            } => {
                let deadline =
                    timeout_ms.map(|ms| now.saturating_add(i64::try_from(ms).unwrap_or(i64::MAX)));
                let mut wait = signal_wait(seq, signal, deadline, now);
                wait.input = filter;
                checkpoints.push(wait);
            }
            Command::ConsumeSignal {
                seq,
                signal,
                signal_id,
            } => {
                // Inserted pending (a no-op if the wait already exists), then completed with the
                // payload in the same transaction.
                checkpoints.push(signal_wait(seq, signal, None, now));
                consumed_signals.push((signal_id, seq));
            }
            Command::SignalTimedOut { seq } => timed_out_signals.push(seq),
            Command::StepTimedOut { seq } => timed_out_steps.push(seq),
            Command::StartChild {
                seq,
                workflow,
                input,
            } if max_depth.is_some_and(|max| run.nesting_depth + 1 > max) => {
                let max = max_depth.unwrap_or_default();
                let error = StepFailure::new(format!(
                    "child `{workflow}` would nest {} deep, over tenant `{}`'s plan's max_nesting_depth ({max}); an operator can raise it (durable tenant plan set {} --max-nesting-depth)",
                    run.nesting_depth + 1,
                    run.namespace,
                    run.namespace,
                ))
                .with_code("quota_exceeded")
                .fatal();
                checkpoints.push(NewCheckpoint {
                    seq,
                    kind: CheckpointKind::Child,
                    name: workflow,
                    status: CheckpointStatus::Failed,
                    worker_group: None,
                    input: Some(input),
                    output: None,
                    error: Some(error),
                    wake_at: None,
                    enqueued_at: Some(now),
                    started_at: None,
                    finished_at: Some(now),
                    retry_policy: None,
                    timeout_ms: None,
                    priority: None,
                    slot: None,
                    saga: None,
                    route: None,
                });
                refused_here = true;
            }
            Command::StartChild {
                seq,
                workflow,
                input,
            } => {
                // A child belongs to its parent's namespace, whoever executes the parent; it
                // starts on the newest version registered here (or parks as blocked if none).
                let version = registry.latest(&workflow).map_or(1, |w| w.version);
                let mut child = NewRun::top_level(
                    child_run_id(&run.id, seq),
                    run.namespace.clone(),
                    workflow.clone(),
                    version,
                    input.clone(),
                );
                child.parent_run_id = Some(run.id.clone());
                child.root_run_id = run.root_run_id.clone();
                child.nesting_depth = run.nesting_depth + 1;
                // In its parent's trace.
                child.traceparent = run.traceparent.clone();
                children.push(child);
                checkpoints.push(NewCheckpoint {
                    seq,
                    kind: CheckpointKind::Child,
                    name: workflow,
                    status: CheckpointStatus::Pending,
                    worker_group: None,
                    input: Some(input),
                    output: None,
                    error: None,
                    wake_at: None,
                    enqueued_at: Some(now),
                    started_at: None,
                    finished_at: None,
                    retry_policy: None,
                    timeout_ms: None,
                    priority: None,
                    slot: None,
                    saga: None,
                    route: None,
                });
            }
        }
    }
    // Held to what a start's attributes are held to: flat values, no NUL, the limits.
    let over_limit = search_attributes
        .as_ref()
        .and_then(|set: &Map<String, Value>| {
            let error = limits.check_attributes(set.iter()).err()?;
            Some(
                StepFailure::new(format!(
                    "the run set search attributes it cannot keep: {error}"
                ))
                .with_code("invalid_attributes")
                .fatal(),
            )
        });
    if over_limit.is_some() {
        search_attributes = None;
        tasks.clear();
        children.clear();
    }
    let outcome = match decision.status {
        _ if let Some(error) = over_limit => TurnOutcome::Fail(error),
        // A refused child is already resolved: the run's next turn sees it at once.
        DecisionStatus::Continue if refused_here => TurnOutcome::Suspend {
            wake_at: Some(decision.next_wake.map_or(now, |at| at.min(now))),
        },
        // A run with a timeout wakes by it at the latest, and its turn then fails it.
        DecisionStatus::Continue => TurnOutcome::Suspend {
            wake_at: match (decision.next_wake, run.deadline_at) {
                (Some(at), Some(deadline)) => Some(at.min(deadline)),
                (at, deadline) => at.or(deadline),
            },
        },
        DecisionStatus::Completed { output } => TurnOutcome::Complete(output),
        DecisionStatus::Failed { error } => TurnOutcome::Fail(error),
        DecisionStatus::Compensated { error } => TurnOutcome::Compensated(error),
        DecisionStatus::CompensationFailed { error } => TurnOutcome::CompensationFailed(error),
        DecisionStatus::ContinuedAsNew { input } => {
            // Same workflow (newest version), namespace and lineage; a clean history.
            let version = registry
                .latest(&run.workflow)
                .map_or(run.workflow_version, |w| w.version);
            let mut next = NewRun::top_level(
                successor_id(&run.id),
                run.namespace.clone(),
                run.workflow.clone(),
                version,
                input,
            );
            next.parent_run_id = run.parent_run_id.clone();
            next.root_run_id = run.root_run_id.clone();
            next.nesting_depth = run.nesting_depth;
            next.tags = run.tags.clone();
            next.search_attributes = search_attributes
                .clone()
                .unwrap_or_else(|| run.search_attributes.clone());
            next.continued_from = Some(run.id.clone());
            // A timeout bounds the whole chain, as it bounds one run; one trace follows it.
            next.deadline_at = run.deadline_at;
            next.traceparent = run.traceparent.clone();
            // Still under its workflow's limit, keyed by its new input (or, if that lacks the
            // key, by the old one): continuing must not escape it.
            next.concurrency = registry
                .concurrency(&run.workflow)
                .and_then(|limit| limit.slot(&run.workflow, &next.input).ok())
                .or_else(|| run.concurrency.clone());
            TurnOutcome::Continue(Box::new(next))
        }
    };
    let dead_letter = match &outcome {
        TurnOutcome::Fail(error) => dead_letter_run(registry, run, RunStatus::Failed, error),
        TurnOutcome::CompensationFailed(error) => {
            dead_letter_run(registry, run, RunStatus::CompensationFailed, error)
        }
        _ => None,
    };
    (
        TurnCommit {
            checkpoints,
            redispatched,
            fired_timers,
            consumed_signals,
            timed_out_signals,
            timed_out_steps,
            children,
            cancel_runs,
            search_attributes,
            dead_letter,
            outcome,
        },
        tasks,
    )
}

fn signal_wait(seq: u32, name: String, deadline: Option<i64>, now: i64) -> NewCheckpoint {
    NewCheckpoint {
        seq,
        kind: CheckpointKind::Signal,
        name,
        status: CheckpointStatus::Pending,
        worker_group: None,
        input: None,
        output: None,
        error: None,
        wake_at: deadline,
        enqueued_at: None,
        started_at: Some(now),
        finished_at: None,
        retry_policy: None,
        timeout_ms: None,
        priority: None,
        slot: None,
        saga: None,
        route: None,
    }
}

/// The id of a run's ContinueAsNew successor: `<base>:c<n+1>` after `<base>:c<n>`, so a
/// replayed decision never starts two successors.
fn successor_id(id: &RunId) -> RunId {
    let raw = id.as_str();
    let (base, n) = match raw.rsplit_once(":c") {
        Some((base, n)) if !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()) => {
            (base, n.parse::<u64>().unwrap_or(0))
        }
        _ => (raw, 0),
    };
    RunId::parse(&format!("{base}:c{}", n + 1)).unwrap_or_else(|_| RunId::generate())
}

/// The checkpoint of call `seq` refused before it was sent: failed at `now` with `error`, on no
/// worker's token.
fn refused_call(
    seq: u32,
    name: String,
    input: Value,
    error: StepFailure,
    now: i64,
) -> NewCheckpoint {
    NewCheckpoint {
        status: CheckpointStatus::Failed,
        worker_group: None,
        error: Some(error),
        enqueued_at: None,
        finished_at: Some(now),
        ..NewCheckpoint::remote_step(seq, name, String::new(), input, now)
    }
}

/// `out` with its priority as the tenant's `plan` lets it be.
fn within(plan: &Plan, mut out: Outgoing) -> Outgoing {
    out.flow.priority = plan.clamp_priority(out.flow.priority);
    out.task.priority = out.flow.priority;
    out
}

/// The task that sends try `attempt` of step `seq` of `run`, routed ([`routing::route`], by
/// the tenant's `rules` and their version) to its step's token on the run's tenant's partition
/// or one of its pools, with how it goes out.
fn outgoing(
    run: &Run,
    seq: u32,
    name: String,
    input: Value,
    attempt: u32,
    mut flow: StepFlow,
    rules: Option<(&RoutingRules, u64)>,
) -> Outgoing {
    let target = RouteTarget {
        workflow: &run.workflow,
        step: Some(&name),
        tags: &run.tags,
        attributes: &run.search_attributes,
        input: Some(&input),
    };
    let routed = routing::route(&run.namespace, flow.pool.as_ref(), rules, &target);
    flow.priority = flow.priority.or(routed.priority);
    let task = RemoteTask {
        run_id: run.id.clone(),
        seq,
        step_id: step_id(&run.id, seq),
        group: partition_token(&name, &routed.partition),
        name,
        input: Some(input),
        context: Some(serde_json::json!({ "tenant": run.namespace })),
        // The run's trace; dispatch replaces it with the sending turn's span where that is
        // traced (see `trace_context::stamp`).
        traceparent: run.traceparent.clone(),
        attempt,
        reply_to: None,
        priority: flow.priority,
        receipt: Default::default(),
    };
    Outgoing {
        task,
        flow,
        route: routed.route,
        fallbacks: routed.fallbacks,
    }
}
