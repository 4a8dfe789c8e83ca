//! The step worker: consumes tasks for registered steps from the transport, runs the handlers
//! and publishes their results.

use std::sync::Arc;

use futures::StreamExt;
use serde_json::Value;
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;
use tracing::Instrument;

use super::cancel::Cancellations;
use super::{Clock, ConnectionSource, Registry, StepContext};
use crate::model::{
    ControlMessage, ControlNotice, RemoteTask, StepFailure, StepOutcome, StepResult,
};
use crate::secrets::redact::Redactor;
use crate::transport::{Partitions, TaskSubscription, Transport, TransportError, TurnTask};

/// How a worker runs.
#[derive(Clone, Debug)]
pub struct WorkerConfig {
    /// Which partitions it serves.
    pub partitions: Partitions,
    /// How many handlers may run at once.
    pub concurrency: usize,
    /// Where its steps' connections come from (`ctx.connection`); `None`: a step that asks
    /// for one fails, saying this worker cannot read them.
    pub connections: Option<Arc<dyn ConnectionSource>>,
}

/// A running step worker. Dropping it does not stop it; call [`Worker::shutdown`].
pub struct Worker {
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Worker {
    /// Subscribes to every registered step on the configured partitions and starts serving.
    pub async fn start(
        registry: Arc<Registry>,
        transport: Arc<dyn Transport>,
        clock: Arc<dyn Clock>,
        config: WorkerConfig,
    ) -> Result<Self, TransportError> {
        let subscription = TaskSubscription {
            names: registry.step_names(),
            partitions: config.partitions,
            concurrency: config.concurrency,
            workflows: registry.workflow_versions(),
            capabilities: registry.capabilities(),
        };
        let mut tasks = transport.consume_tasks(subscription.clone()).await?;
        // Turns of the workflows registered here, for control planes that lack them.
        let turns = match transport.remote_turns() {
            Some(remote) if !subscription.workflows.is_empty() => {
                Some(remote.consume_turns(subscription).await?)
            }
            _ => None,
        };
        let (stop, mut stopped) = watch::channel(false);
        let cancellations = Arc::new(Cancellations::default());
        let mut control = transport.subscribe_control().await?;
        let listener = {
            let (cancellations, mut stopped) = (cancellations.clone(), stopped.clone());
            tokio::spawn(async move {
                loop {
                    tokio::select! {
                        _ = stopped.changed() => return,
                        message = control.next() => match message {
                            Some(ControlMessage { notice: ControlNotice::Cancel { run_id }, .. }) => {
                                cancellations.cancel(run_id)
                            }
                            Some(_) => {}
                            None => return,
                        },
                    }
                }
            })
        };
        // Steps and turns share the worker's concurrency.
        let permits = Arc::new(Semaphore::new(config.concurrency.max(1)));
        let turner = turns.map(|mut turns| {
            let (registry, transport, clock, permits, mut stopped) = (
                registry.clone(),
                transport.clone(),
                clock.clone(),
                permits.clone(),
                stopped.clone(),
            );
            tokio::spawn(async move {
                loop {
                    // A turn is taken only when it can run at once, as a task is.
                    let permit = tokio::select! {
                        _ = stopped.changed() => return,
                        p = permits.clone().acquire_owned() => match p { Ok(p) => p, Err(_) => return },
                    };
                    let TurnTask { task, receipt } = tokio::select! {
                        _ = stopped.changed() => return,
                        t = turns.next() => match t { Some(t) => t, None => return },
                    };
                    let (registry, transport, clock) =
                        (registry.clone(), transport.clone(), clock.clone());
                    tokio::spawn(async move {
                        let turn = super::remote_turn::decide(&registry, clock, &task);
                        let decision =
                            super::remote_turn::beating(&*transport, &task, turn).await;
                        // Turns came from this transport's remote turns, so it has them.
                        let sent = match transport.remote_turns() {
                            Some(remote) => remote.publish_decision(decision).await,
                            None => Ok(()),
                        };
                        // Done once the decision is sent; given back otherwise (the receipt's
                        // default), so a worker that stops first leaves the turn to another.
                        match sent {
                            Ok(()) => receipt.done(),
                            Err(e) => tracing::warn!(error = %e, "could not send a turn's decision; giving the turn back"),
                        }
                        drop(receipt);
                        drop(permit);
                    });
                }
            })
        });
        let connections = config.connections;
        let task = tokio::spawn(async move {
            let mut running = JoinSet::new();
            loop {
                let permit = tokio::select! {
                    _ = stopped.changed() => break,
                    p = permits.clone().acquire_owned() => match p { Ok(p) => p, Err(_) => break },
                };
                let task = tokio::select! {
                    _ = stopped.changed() => break,
                    t = tasks.next() => match t { Some(t) => t, None => break },
                };
                let (registry, transport, clock, cancellations, connections) = (
                    registry.clone(),
                    transport.clone(),
                    clock.clone(),
                    cancellations.clone(),
                    connections.clone(),
                );
                // Every log line of the step, its handler's included, names its run and tenant.
                let tenant = crate::transport::naming::token_tenant(&task.group);
                // In the run's trace, under the turn that sent it.
                let span = crate::trace_context::span_in_trace!(
                    task.traceparent.as_deref(),
                    "step",
                    tenant = %tenant,
                    run_id = %task.run_id,
                    step = %task.name
                );
                running.spawn(async move {
                    let mut task = task;
                    // Settled once the result is sent: a worker that dies first leaves the
                    // task to another, as the same job.
                    let receipt = std::mem::take(&mut task.receipt);
                    let reply_to = task.reply_to.clone();
                    let step = task.name.clone();
                    let began = std::time::Instant::now();
                    let handed = Handed {
                        tenant: tenant.clone(),
                        cancellations,
                        connections,
                    };
                    let mut result = execute(&registry, &*clock, handed, task).await;
                    let outcome = match result.outcome {
                        StepOutcome::Completed { .. } => "completed",
                        StepOutcome::Failed { .. } => "failed",
                    };
                    crate::metrics::worker_step(tenant.as_str(), &step, outcome, began.elapsed());
                    // The transport settles the task with the result, in one step if it can.
                    result.receipt = receipt.clone();
                    // Unanswered, the task goes back (the receipt's default).
                    if let Err(e) = transport.publish_result(result, reply_to.as_deref()).await {
                        tracing::warn!(error = %e, "could not publish a step result; giving the task back");
                    }
                    drop(receipt);
                    drop(permit);
                }.instrument(span));
                while running.try_join_next().is_some() {}
            }
            // Let in-flight handlers finish and report, so their work is not repeated.
            while running.join_next().await.is_some() {}
            listener.abort();
            if let Some(turner) = turner {
                turner.abort();
            }
        });
        Ok(Worker { stop, task })
    }

    /// Stops taking tasks and waits for the handlers already running to finish and report.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        if let Err(e) = self.task.await {
            tracing::error!(error = %e, "the step worker ended abnormally");
        }
    }
}

/// What the worker hands each step beside its task.
struct Handed {
    tenant: crate::model::Namespace,
    cancellations: Arc<Cancellations>,
    connections: Option<Arc<dyn ConnectionSource>>,
}

async fn execute(
    registry: &Registry,
    clock: &dyn Clock,
    handed: Handed,
    task: RemoteTask,
) -> StepResult {
    let started_at = clock.now();
    let outcome = match registry.step_handler(&task.name) {
        None => StepOutcome::Failed {
            error: StepFailure::new(format!("no handler for {}", task.name))
                .with_code("no_handler")
                .fatal(),
        },
        Some(handler) => {
            let received = Arc::new(std::sync::Mutex::new(Redactor::default()));
            let ctx = StepContext {
                run_id: task.run_id.clone(),
                seq: task.seq,
                step_id: task.step_id.clone(),
                attempt: task.attempt,
                group: task.group.clone(),
                tenant: handed.tenant,
                cancellations: handed.cancellations,
                connections: handed.connections,
                received: received.clone(),
            };
            let call = std::panic::AssertUnwindSafe(handler(
                ctx,
                task.input.clone().unwrap_or(Value::Null),
            ));
            let outcome = match futures::FutureExt::catch_unwind(call).await {
                Ok(Ok(output)) => StepOutcome::Completed { output },
                Ok(Err(e)) => StepOutcome::Failed { error: e.0 },
                Err(_) => StepOutcome::Failed {
                    error: StepFailure::new(format!("step `{}` panicked", task.name))
                        .with_code("panic"),
                },
            };
            let received = received.lock().unwrap_or_else(|p| p.into_inner());
            redacted(outcome, &received)
        }
    };
    StepResult {
        run_id: task.run_id,
        seq: task.seq,
        step_id: task.step_id,
        started_at: Some(started_at),
        outcome,
        receipt: Default::default(),
    }
}

/// `outcome` without any secret its step received, before it is kept: a step that echoes one
/// (a downstream answer repeating its `Authorization` header) leaves `[redacted]` in its place.
fn redacted(outcome: StepOutcome, received: &Redactor) -> StepOutcome {
    if received.is_empty() {
        return outcome;
    }
    match outcome {
        StepOutcome::Completed { mut output } => {
            received.value(&mut output);
            StepOutcome::Completed { output }
        }
        StepOutcome::Failed { mut error } => {
            error.message = received.text(&error.message);
            if let Some(details) = error.details.as_mut() {
                received.value(details);
            }
            StepOutcome::Failed { error }
        }
    }
}
