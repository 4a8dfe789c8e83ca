//! Asking a run: queries, answered from its replayed state with nothing written, and updates,
//! which its handler accepts (kept with the run, delivered as a signal, answered with a reply)
//! or refuses (nothing kept). See [`crate::runtime::Handlers`] for what a workflow registers.

use serde_json::Value;

use super::input::{check_payload, check_signal_name};
use super::{Engine, EngineError};
use crate::model::{AcceptedUpdate, Run, RunId, Scope, TenantEventKind, UpdateId};
use crate::runtime::turn::{TurnInput, replay_handlers};
use crate::runtime::{HandlerKind, Handlers};
use crate::store::UpdateSent;

/// What an update did.
#[derive(Clone, Debug)]
pub enum UpdateOutcome {
    /// Accepted now, or before under the same id: the handler's reply.
    Replied(Value),
    /// The run already ended; nothing was kept.
    RunFinished(Box<Run>),
    /// No visible run with that id.
    NotFound,
}

impl Engine {
    /// Asks run `id` (if `scope` sees it) query `name` with `argument`: the handler's answer,
    /// from the state the run's history gives (an ended run's too). Nothing is written. `None`
    /// when no such run is visible.
    pub async fn query(
        &self,
        scope: &Scope,
        id: &RunId,
        name: &str,
        argument: Value,
    ) -> Result<Option<Value>, EngineError> {
        check_payload(&self.state.config.limits, "the query's argument", &argument)?;
        let Some(run) = self.state.store.get_run(scope, id).await? else {
            return Ok(None);
        };
        let handlers = self.replayed(scope, &run).await?;
        answer(&handlers, &run, HandlerKind::Query, name, argument).map(Some)
    }

    /// Sends run `id` (if `scope` sees it and it has not ended) update `name` with `argument`.
    /// The workflow's handler checks it against the run's state: refused, nothing is kept and
    /// the error carries the handler's reason; accepted, the update is kept with the run under
    /// `update_id` (a fresh one when `None`), its argument is delivered as signal `name`, and
    /// the handler's reply is returned. Repeated under the same id, it is neither checked nor
    /// delivered again: the first reply is returned, even once the run has ended.
    pub async fn update(
        &self,
        scope: &Scope,
        id: &RunId,
        name: &str,
        argument: Value,
        update_id: Option<UpdateId>,
    ) -> Result<UpdateOutcome, EngineError> {
        let limits = &self.state.config.limits;
        check_signal_name(limits, name)?;
        check_payload(limits, "the update's argument", &argument)?;
        let store = &self.state.store;
        if let Some(update_id) = &update_id
            && let Some(kept) = store.stored_update(scope, id, update_id).await?
        {
            return repeated(update_id, name, kept.name, kept.reply);
        }
        if let Some(tenant) = scope.namespace() {
            self.admit_payload(tenant, &argument).await?;
        }
        let Some(run) = store.get_run(scope, id).await? else {
            return Ok(UpdateOutcome::NotFound);
        };
        if run.status.is_terminal() {
            return Ok(UpdateOutcome::RunFinished(Box::new(run)));
        }
        let handlers = self.replayed(scope, &run).await?;
        let reply = answer(&handlers, &run, HandlerKind::Update, name, argument.clone())?;
        check_payload(limits, "the update's reply", &reply)?;
        let update = AcceptedUpdate {
            id: update_id.unwrap_or_else(UpdateId::random),
            name: name.to_owned(),
            argument,
            reply,
        };
        let now = self.state.clock.now();
        let send = store.send_update(scope, id, &update, now);
        match self.as_caller(scope, "signals", send).await? {
            UpdateSent::Delivered(run) => {
                self.state.queued(&run.namespace);
                self.state
                    .emit(&run, TenantEventKind::for_status(run.status), None);
                Ok(UpdateOutcome::Replied(update.reply))
            }
            UpdateSent::Repeated(kept) => repeated(&update.id, name, kept.name, kept.reply),
            UpdateSent::RunFinished(run) => Ok(UpdateOutcome::RunFinished(Box::new(run))),
            UpdateSent::NotFound => Ok(UpdateOutcome::NotFound),
        }
    }

    /// The handlers run `run`'s body registers when replayed on its history.
    async fn replayed(&self, scope: &Scope, run: &Run) -> Result<Handlers, EngineError> {
        let Some(workflow) = self.state.registry.get(&run.workflow, run.workflow_version) else {
            return Err(EngineError::CodeElsewhere {
                workflow: run.workflow.clone(),
                version: run.workflow_version,
            });
        };
        let store = &self.state.store;
        let history = store.checkpoints(scope, &run.id).await?;
        let signals = store.buffered_signals(&run.id).await?;
        let input = TurnInput {
            run_id: run.id.clone(),
            namespace: run.namespace.clone(),
            input: run.input.clone(),
            history,
            signals,
            now: self.state.clock.now(),
        };
        replay_handlers(workflow, input, self.state.clock.clone())
            .await
            .map_err(|e| EngineError::Replay(run.id.clone(), e.to_string()))
    }
}

/// Calls the `kind` handler `name` of `run`'s replayed `handlers`.
fn answer(
    handlers: &Handlers,
    run: &Run,
    kind: HandlerKind,
    name: &str,
    argument: Value,
) -> Result<Value, EngineError> {
    match handlers.call(kind, name, argument) {
        Some(reply) => reply.map_err(EngineError::Handler),
        None => Err(EngineError::NoHandler {
            kind,
            name: name.to_owned(),
            workflow: run.workflow.clone(),
            known: handlers.names(kind),
        }),
    }
}

/// The reply kept under `update_id`, if it went to the same handler.
fn repeated(
    update_id: &UpdateId,
    name: &str,
    kept_name: String,
    reply: Value,
) -> Result<UpdateOutcome, EngineError> {
    if kept_name == name {
        Ok(UpdateOutcome::Replied(reply))
    } else {
        Err(EngineError::UpdateIdTaken {
            id: update_id.clone(),
            name: kept_name,
        })
    }
}
