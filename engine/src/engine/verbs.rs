//! The control verbs on a run that exists: signal, cancel, retry, continue, redispatch. Each
//! acts only inside the caller's scope and tells the run's tenant what changed.

use std::future::Future;

use serde_json::Value;

use super::input::{check_payload, check_signal_name};
use super::{Engine, EngineError, StartRun};
use crate::driver::loops::redispatch;
use crate::driver::turn::flow;
use crate::fair;
use crate::model::{
    COMPENSATE_SIGNAL, Checkpoint, CheckpointKind, CheckpointStatus, Run, RunId, RunStatus, Scope,
    StepFailure, TenantEventKind,
};
use crate::store::{RunPatch, SignalSent};
use crate::trace_context;

/// What a control verb (cancel, retry, retry with input) did.
#[derive(Clone, Debug)]
pub enum Control {
    /// Done; the run as it is now (for retry with input, the new run).
    Done(Run),
    /// No run with that id is visible.
    NotFound,
    /// The run is in a status the verb does not apply to.
    WrongStatus(Run),
}

impl Engine {
    /// Sends signal `name` with `payload` to run `id`, if `scope` sees it. The signal is
    /// buffered until the run waits for it, so it is never lost to timing.
    pub async fn signal(
        &self,
        scope: &Scope,
        id: &RunId,
        name: &str,
        payload: Value,
    ) -> Result<SignalSent, EngineError> {
        let limits = &self.state.config.limits;
        check_signal_name(limits, name)?;
        check_payload(limits, "the signal's payload", &payload)?;
        if let Some(tenant) = scope.namespace() {
            // A tenant's own request: held to its plan (an operator's is not).
            self.admit_payload(tenant, &payload).await?;
        }
        let send = self
            .state
            .store
            .send_signal(scope, id, name, &payload, self.state.clock.now());
        let sent = self.as_caller(scope, "signals", send).await?;
        if let SignalSent::Delivered(run) = &sent {
            // A mark in the run's trace: the signal it was sent.
            let span = trace_context::span_in_trace!(run.traceparent.as_deref(), "signal", tenant = %run.namespace, run_id = %run.id, signal = name);
            span.in_scope(|| tracing::debug!("signal delivered"));
            self.state.queued(&run.namespace);
            self.state
                .emit(run, TenantEventKind::for_status(run.status), None);
        }
        Ok(sent)
    }

    /// Signal-with-start: sends signal `name` with `payload` to run `start.id` (required), first
    /// starting it with `start` if no run has that id; the run, and whether this call started
    /// it. Two callers racing on one id start it once, and both signals arrive. A run of that id
    /// that already ended takes no signal: [`SignalSent::RunFinished`] comes back as an error.
    pub async fn signal_with_start(
        &self,
        scope: &Scope,
        start: StartRun,
        name: &str,
        payload: Value,
    ) -> Result<(Run, bool), EngineError> {
        let Some(id) = start.id.clone() else {
            return Err(EngineError::BadInput(
                "signal-with-start needs the run's id: it signals the run of that id, starting it first if there is none".into(),
            ));
        };
        // The signal is checked before the run is started, so a refused one starts nothing.
        let limits = &self.state.config.limits;
        check_signal_name(limits, name)?;
        check_payload(limits, "the signal's payload", &payload)?;
        if let Some(tenant) = scope.namespace() {
            self.admit_payload(tenant, &payload).await?;
        }
        let mut started = false;
        if self.state.store.get_run(scope, &id).await?.is_none() {
            match self.start_run(start).await {
                Ok(_) => started = true,
                // Started meanwhile by another caller (or another tenant holds the id, which
                // the signal below then does not see).
                Err(EngineError::RunExists(_)) => {}
                Err(e) => return Err(e),
            }
        }
        match self.signal(scope, &id, name, payload).await? {
            SignalSent::Delivered(run) => Ok((run, started)),
            SignalSent::NotFound => Err(EngineError::RunExists(id)),
            SignalSent::RunFinished(run) => Err(EngineError::RunEnded(Box::new(run))),
        }
    }

    /// Cancels run `id` if `scope` sees it: a waiting run is `cancelled` at once; a run whose
    /// turn is executing goes `cancelling` and is `cancelled` when that turn ends.
    pub async fn cancel(&self, scope: &Scope, id: &RunId) -> Result<Control, EngineError> {
        let store = &self.state.store;
        let now = self.state.clock.now();
        let reason = StepFailure::new("cancelled by request").with_code("cancelled");
        let waiting = [RunStatus::Pending, RunStatus::Suspended, RunStatus::Blocked];
        let patch = RunPatch {
            status: RunStatus::Cancelled,
            error: Some(reason.clone()),
        };
        let cancel = async {
            match store.update_run_if(scope, id, &waiting, patch, now).await? {
                Some(run) => Ok(Some(run)),
                None => {
                    let patch = RunPatch {
                        status: RunStatus::Cancelling,
                        error: Some(reason),
                    };
                    store
                        .update_run_if(scope, id, &[RunStatus::Running], patch, now)
                        .await
                }
            }
        };
        let run = self.as_caller(scope, "cancels", cancel).await?;
        if let Some(run) = &run {
            self.state.announce_cancel(&run.id).await;
            if run.status == RunStatus::Cancelled {
                // Its slot under a concurrency ceiling came free: a queued run may start; so
                // did the slots its steps out held.
                flow::release_run(&self.state, run).await;
                self.state.queued(&run.namespace);
            }
        }
        self.controlled(scope, id, run).await
    }

    /// Cancels run `id`, if `scope` sees it, with compensation: a run of a workflow this engine
    /// runs starts no new work at its next turn and runs the compensations of its completed
    /// steps, newest first, then ends `compensated` (or `compensation_failed`). A run of a
    /// workflow run elsewhere (an SDK worker's, whose history holds no saga) is cancelled as
    /// [`Engine::cancel`] cancels it.
    pub async fn cancel_compensating(
        &self,
        scope: &Scope,
        id: &RunId,
    ) -> Result<Control, EngineError> {
        let store = &self.state.store;
        let Some(run) = store.get_run(scope, id).await? else {
            return Ok(Control::NotFound);
        };
        if run.status.is_terminal() {
            return Ok(Control::WrongStatus(run));
        }
        let registry = &self.state.registry;
        if registry.get(&run.workflow, run.workflow_version).is_none() {
            return self.cancel(scope, id).await;
        }
        let now = self.state.clock.now();
        let send = store.send_signal(scope, id, COMPENSATE_SIGNAL, &Value::Null, now);
        match self.as_caller(scope, "cancels", send).await? {
            SignalSent::Delivered(run) => {
                self.state.queued(&run.namespace);
                self.state
                    .emit(&run, TenantEventKind::for_status(run.status), None);
                Ok(Control::Done(run))
            }
            SignalSent::NotFound => Ok(Control::NotFound),
            SignalSent::RunFinished(run) => Ok(Control::WrongStatus(run)),
        }
    }

    /// Re-drives a failed or dead run from its last good checkpoint. It waits queued, as a new
    /// start would, while its tenant is at its concurrency ceiling (an operator's retry too:
    /// the ceiling holds for everyone; raise it to let the run through).
    pub async fn retry(&self, scope: &Scope, id: &RunId) -> Result<Control, EngineError> {
        let retry = self
            .state
            .store
            .retry_run(scope, id, self.state.clock.now());
        let run = self.as_caller(scope, "retries", retry).await?;
        let control = self.controlled(scope, id, run).await?;
        self.state.wake.notify_one();
        Ok(control)
    }

    /// Drives a `blocked` run again now: after a process serving its version started, or a
    /// quota was raised. If the cause remains, its next turn parks it again with the reason.
    pub async fn continue_run(&self, scope: &Scope, id: &RunId) -> Result<Control, EngineError> {
        let patch = RunPatch {
            status: RunStatus::Pending,
            error: None,
        };
        let run = self
            .state
            .store
            .update_run_if(
                scope,
                id,
                &[RunStatus::Blocked],
                patch,
                self.state.clock.now(),
            )
            .await?;
        let control = self.controlled(scope, id, run).await?;
        self.state.wake.notify_one();
        Ok(control)
    }

    /// Sends run `id`'s waiting remote steps again now, with their `step_id`s (a worker that
    /// already ran one can tell), instead of waiting for the lost-dispatch window. Returns
    /// how many steps went out; [`Control::WrongStatus`] when the run waits on no step.
    pub async fn redispatch(
        &self,
        scope: &Scope,
        id: &RunId,
    ) -> Result<(Control, usize), EngineError> {
        let store = &self.state.store;
        let Some(run) = store.get_run(scope, id).await? else {
            return Ok((Control::NotFound, 0));
        };
        let waiting = matches!(run.status, RunStatus::Suspended | RunStatus::Running);
        let steps: Vec<Checkpoint> = if waiting {
            store
                .checkpoints(scope, id)
                .await?
                .into_iter()
                .filter(|cp| {
                    cp.kind == CheckpointKind::RemoteStep
                        && cp.status == CheckpointStatus::Pending
                        // A retry waiting out its backoff is the turn's to send.
                        && cp.wake_at.is_none_or(|at| at <= self.state.clock.now())
                })
                .collect()
        } else {
            Vec::new()
        };
        if steps.is_empty() {
            return Ok((Control::WrongStatus(run), 0));
        }
        let n = steps.len();
        for cp in steps {
            redispatch::send_again(&self.state, &run.namespace, cp, self.state.clock.now()).await?;
        }
        tracing::info!(run_id = %run.id, steps = n, "redispatched on request");
        Ok((Control::Done(run), n))
    }

    /// Runs `write` in the lane of the tenant `scope` is (a tenant's own request waits its turn
    /// among that tenant's writes, under `key`); an operator's runs in the system lane.
    pub(super) async fn as_caller<F: Future>(
        &self,
        scope: &Scope,
        key: &str,
        write: F,
    ) -> F::Output {
        match scope.namespace() {
            Some(tenant) => fair::within(self.state.lane(tenant, key), write).await,
            None => write.await,
        }
    }

    async fn controlled(
        &self,
        scope: &Scope,
        id: &RunId,
        changed: Option<Run>,
    ) -> Result<Control, EngineError> {
        match changed {
            Some(run) => {
                self.state
                    .emit(&run, TenantEventKind::for_status(run.status), None);
                Ok(Control::Done(run))
            }
            None => Ok(match self.state.store.get_run(scope, id).await? {
                Some(run) => Control::WrongStatus(run),
                None => Control::NotFound,
            }),
        }
    }
}
