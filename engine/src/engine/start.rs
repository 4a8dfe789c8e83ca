//! Starting runs: a top-level start, and a retry with edited input, which starts a new run.
//! With a free turn slot, the first turn is written with the insert
//! ([`crate::driver::turn::first`]).

use serde_json::Value;

use tracing::Instrument;

use super::input::{StartRun, check_chosen_id, check_payload, check_start};
use super::{Control, Engine, EngineError};
use crate::driver::turn::first::{self, IdOrigin, Started};
use crate::driver::turn::remote;
use crate::driver::turn::runner::{FirstTurn, run_span, spawn_turns};
use crate::fair;
use crate::model::{Run, RunId, RunStatus, Scope, TenantEventKind};
use crate::store::{History, NewRun, StoreError};
use crate::trace_context;

impl Engine {
    /// Starts a top-level run of the newest registered version of `req.workflow`, or of the
    /// newest version of it a live worker on the run's partition announces (its turns then run
    /// there).
    pub async fn start_run(&self, req: StartRun) -> Result<Run, EngineError> {
        check_chosen_id(&req)?;
        self.start_own(req).await
    }

    /// [`Engine::start_run`] for a run the engine starts itself (an event's trigger), whose id
    /// may take a form reserved for the engine.
    pub(crate) async fn start_own(&self, req: StartRun) -> Result<Run, EngineError> {
        check_start(&req, &self.state.config.limits)?;
        let registry = &self.state.registry;
        let namespace = req.namespace.unwrap_or_else(|| self.stamp_namespace());
        let version = match registry.latest(&req.workflow) {
            Some(workflow) => Some(workflow.version),
            None => remote::served_versions(&self.state, &req.workflow, &namespace.clone().into())
                .await
                .last()
                .copied(),
        };
        let Some(version) = version else {
            return Err(EngineError::UnknownWorkflow(
                req.workflow.clone(),
                registry.workflow_names().join(", "),
            ));
        };
        let admitted = self
            .admit_start(&namespace, &req.workflow, &req.input)
            .await?;
        let (id, origin) = match req.id {
            Some(id) => (id, IdOrigin::Chosen),
            None => (RunId::generate(), IdOrigin::Generated),
        };
        let mut new = NewRun::top_level(id.clone(), namespace, &req.workflow, version, req.input);
        new.tags = req.tags;
        new.search_attributes = req.search_attributes;
        new.concurrency = admitted.concurrency;
        new.deadline_at = req.timeout.map(|t| {
            let ms = i64::try_from(t.as_millis()).unwrap_or(i64::MAX);
            self.state.clock.now().saturating_add(ms)
        });
        match self.create(new, origin, admitted.counted).await {
            Err(EngineError::Store(StoreError::Conflict(_))) => Err(EngineError::RunExists(id)),
            started => started,
        }
    }

    /// Starts a new run of the same workflow with edited `input`, stamped with the original's
    /// namespace (whoever asks) and `retry_of` the original, which is left untouched.
    pub async fn retry_with_input(
        &self,
        scope: &Scope,
        id: &RunId,
        input: Value,
    ) -> Result<Control, EngineError> {
        check_payload(&self.state.config.limits, "the input", &input)?;
        let Some(original) = self.state.store.get_run(scope, id).await? else {
            return Ok(Control::NotFound);
        };
        let admitted = self
            .admit_start(&original.namespace, &original.workflow, &input)
            .await?;
        let registry = &self.state.registry;
        let version = registry
            .latest(&original.workflow)
            .map_or(original.workflow_version, |w| w.version);
        let mut new = NewRun::top_level(
            RunId::generate(),
            original.namespace.clone(),
            &original.workflow,
            version,
            input,
        );
        new.tags = original.tags.clone();
        new.search_attributes = original.search_attributes.clone();
        new.retry_of = Some(original.id.clone());
        new.concurrency = admitted.concurrency;
        let run = self
            .create(new, IdOrigin::Generated, admitted.counted)
            .await?;
        Ok(Control::Done(run))
    }

    /// Inserts a new run and announces it to its tenant. With a free turn slot, the run's first
    /// turn is computed and persisted with the insert (see [`start`]), or, if it cannot be
    /// computed, the run is inserted already claimed and its first turn starts here at once;
    /// otherwise the claim loop is poked. A run `counted` against a concurrency ceiling or limit
    /// always waits for the claim loop, which starts it only while there is room under both.
    ///
    /// The start is a span of its own: the run's trace (every turn, step and signal of it)
    /// continues it, and it continues the caller's (the request's) when there is one.
    async fn create(
        &self,
        mut new: NewRun,
        id: IdOrigin,
        counted: bool,
    ) -> Result<Run, EngineError> {
        let span = tracing::info_span!(
            "start",
            tenant = %new.namespace,
            run_id = %new.id,
            workflow = %new.workflow
        );
        new.traceparent = trace_context::traceparent(&span);
        self.create_in_span(new, id, counted).instrument(span).await
    }

    async fn create_in_span(
        &self,
        new: NewRun,
        id: IdOrigin,
        counted: bool,
    ) -> Result<Run, EngineError> {
        let state = &self.state;
        let slot = if counted {
            None
        } else {
            state.try_turn_slot(&new.namespace)
        };
        let (new, slot) = match slot {
            Some(slot) => {
                // A task of its own, so that a caller that gives up (a client hanging up) cannot
                // stop it halfway: once its first steps left, the start is carried through.
                let state = state.clone();
                // The first turn runs the workflow's code: in the run's span, as later turns.
                let span = run_span(
                    &new.namespace,
                    &new.id,
                    &new.workflow,
                    new.traceparent.as_deref(),
                );
                let first = async move { first::with_first_turn(&state, new, id, slot).await };
                let started = tokio::spawn(first.instrument(span)).await;
                match started {
                    Ok(started) => match started? {
                        Started::Run(run) => return Ok(run),
                        Started::Undecided(new, slot) => (new, Some(slot)),
                    },
                    Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                    Err(_) => return Err(EngineError::ShuttingDown),
                }
            }
            None => (new, None),
        };
        let claim = slot.as_ref().map(|_| state.claim());
        let lane = state.lane(&new.namespace, &new.workflow);
        let create = state
            .store
            .create_run(new, state.clock.now(), claim.as_ref());
        let run = fair::within(lane, create).await?;
        state.emit(&run, TenantEventKind::RunStarted, None);
        match slot {
            // A new run has no history yet: its first turn needs no read.
            Some(slot) if run.status == RunStatus::Running => {
                let first = FirstTurn::Claimed(Some(History::default()));
                spawn_turns(state.clone(), run.clone(), first, slot)
            }
            _ => state.queued(&run.namespace),
        }
        Ok(run)
    }
}
