use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Map, Value};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::input::{check_payload, check_signal_name, check_start};
use super::shared::Shared;
use super::{drive, inbox, lease, redispatch, remote, results, start, sweep};
use crate::model::{
    Checkpoint, CheckpointKind, CheckpointStatus, Millis, Namespace, Run, RunId, RunStatus, Scope,
    StepFailure, TenantEventKind,
};
use crate::runtime::{Clock, Registry, SystemClock};
use crate::store::{History, NewRun, RunPatch, SignalSent, Store, StoreError};
use crate::transport::{Transport, TransportError};

/// How an engine runs.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// The namespace this engine polls and stamps; `None` makes it an operator that drives every
    /// namespace and stamps `default` on starts that name none.
    pub namespace: Option<Namespace>,
    /// The lease holder name (unique per process).
    pub owner: String,
    /// How long a claimed run stays locked without renewal. A crashed driver's runs are taken
    /// over after this long.
    pub lease: Duration,
    /// A remote step with no result after this long is dispatched again.
    pub redispatch_after: Duration,
    /// How many turns may execute at once. A turn keeps its slot until its write commits, so
    /// under a burst the slots must cover the turn rate times the store's commit latency: with
    /// 64, a PostgreSQL control plane completed 1.6x fewer runs/s than with 512 (bench/README).
    pub max_concurrent_turns: usize,
    /// The longest the drive loop sleeps before looking for work started elsewhere.
    pub idle_poll: Duration,
    /// How many times a run whose driver died is taken over before it is given up as `dead`
    /// (a run that crashes every process that runs it must not crash them forever).
    pub max_recoveries: u32,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            namespace: None,
            owner: format!(
                "engine-{}-{}",
                std::process::id(),
                &uuid::Uuid::new_v4().simple().to_string()[..8]
            ),
            lease: Duration::from_secs(30),
            redispatch_after: Duration::from_secs(30),
            max_concurrent_turns: 512,
            idle_poll: Duration::from_millis(500),
            max_recoveries: 5,
        }
    }
}

/// Why the engine refused or failed a request.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// No workflow of that name is registered.
    #[error("no workflow named `{0}` is registered; registered workflows: {1}")]
    UnknownWorkflow(String, String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The transport failed.
    #[error(transparent)]
    Transport(#[from] TransportError),
    /// A start chose the id of a run that exists (an idempotency key used before); nothing
    /// was started.
    #[error("a run with id `{0}` already exists; pick another id or omit it")]
    RunExists(RunId),
    /// The request itself is wrong (a blank workflow name, input the store cannot keep); nothing
    /// was changed. The message says what to fix.
    #[error("{0}")]
    BadInput(String),
    /// The engine was already started.
    #[error("the engine is already running")]
    AlreadyStarted,
    /// The runtime stopped while the request was being carried out, which may have taken
    /// effect.
    #[error(
        "the engine shut down while starting the run, which may have started: list the runs (or start it with an id, which is refused if it exists) before trying again"
    )]
    ShuttingDown,
}

impl EngineError {
    /// Whether the request itself was wrong (the caller can fix it, and the message says how),
    /// as opposed to a failure on the engine's side: what every door answers as the caller's.
    pub fn is_callers(&self) -> bool {
        matches!(
            self,
            EngineError::UnknownWorkflow(..) | EngineError::BadInput(_) | EngineError::RunExists(_)
        )
    }
}

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

/// A request to start a top-level run.
#[derive(Clone, Debug, Default)]
pub struct StartRun {
    /// The workflow to run (its newest registered version).
    pub workflow: String,
    /// Its input.
    pub input: Value,
    /// The namespace to stamp; `None` uses the engine's own (or `default` on an operator). A
    /// tenant request passes its verified tenant here, never a value from the request body.
    pub namespace: Option<Namespace>,
    /// A caller-chosen id (idempotency key); a fresh one when `None`.
    pub id: Option<RunId>,
    /// Labels.
    pub tags: Vec<String>,
    /// Search attributes.
    pub search_attributes: Map<String, Value>,
}

/// A workflow engine: owns the control loops for its namespace and starts runs.
#[derive(Clone)]
pub struct Engine {
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
    loops: Arc<Mutex<Option<Vec<JoinHandle<()>>>>>,
}

impl Engine {
    /// An engine over `store` and `transport` running the code in `registry`. Nothing runs
    /// until [`Engine::start`].
    pub fn new(
        store: Arc<dyn Store>,
        transport: Arc<dyn Transport>,
        registry: Arc<Registry>,
        config: EngineConfig,
    ) -> Self {
        Self::with_clock(store, transport, registry, config, Arc::new(SystemClock))
    }

    /// Like [`Engine::new`] with an explicit clock.
    pub fn with_clock(
        store: Arc<dyn Store>,
        transport: Arc<dyn Transport>,
        registry: Arc<Registry>,
        config: EngineConfig,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let (stop, _) = watch::channel(false);
        Engine {
            shared: Arc::new(Shared::new(store, transport, registry, clock, config)),
            stop,
            loops: Arc::new(Mutex::new(None)),
        }
    }

    /// Starts the control loops. Steps whose dispatch was lost with a process that is gone are
    /// sent again first.
    pub async fn start(&self) -> Result<(), EngineError> {
        if self
            .loops
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
        {
            return Err(EngineError::AlreadyStarted);
        }
        // Alive before anything is sent, so no peer takes this driver's steps for lost ones.
        let now = self.shared.clock.now();
        let alive_until = now + self.shared.config.lease.as_millis() as Millis;
        let peers = self
            .shared
            .store
            .beat_driver(&self.shared.config.owner, alive_until, now)
            .await?;
        self.shared.note_peers(Some(peers));
        let results = self.shared.transport.consume_results().await?;
        redispatch::redispatch_due(&self.shared).await?;
        sweep::sweep_once(&self.shared).await?;
        let served = self.shared.registry.workflow_versions();
        let now = self.shared.clock.now();
        for run in self
            .shared
            .store
            .unblock_runs(&self.shared.scope, &served, now)
            .await?
        {
            tracing::info!(run_id = %run.id, workflow = %run.workflow, version = run.workflow_version, "un-parked a blocked run: its version is served here now");
            self.shared.emit(&run, TenantEventKind::RunStarted, None);
        }
        let s = &self.shared;
        let handles = vec![
            tokio::spawn(sweep::sweep_loop(s.clone(), self.stop.subscribe())),
            tokio::spawn(drive::drive_loop(s.clone(), self.stop.subscribe())),
            tokio::spawn(results::results_loop(
                s.clone(),
                results,
                self.stop.subscribe(),
            )),
            tokio::spawn(redispatch::redispatch_loop(
                s.clone(),
                self.stop.subscribe(),
            )),
            tokio::spawn(lease::renew_loop(s.clone(), self.stop.subscribe())),
            tokio::spawn(inbox::inbox_loop(s.clone(), self.stop.subscribe())),
        ];
        *self.loops.lock().unwrap_or_else(|p| p.into_inner()) = Some(handles);
        s.set_accepting(true);
        Ok(())
    }

    /// Stops claiming new work, lets running turns finish and persist, applies results that
    /// already arrived, and releases this engine's leases so a restart resumes at once.
    pub async fn shutdown(&self) {
        self.shared.set_accepting(false);
        let _ = self.stop.send(true);
        let handles = self.loops.lock().unwrap_or_else(|p| p.into_inner()).take();
        for h in handles.into_iter().flatten() {
            if let Err(e) = h.await {
                tracing::error!(error = %e, "an engine loop ended abnormally");
            }
        }
        // Turns already executing finish and persist; their runs are not left half-applied.
        self.shared.turns_finished().await;
        // Then the results they held are applied (recorded: no new turn starts now).
        self.shared.applying.close();
        self.shared.applying.wait().await;
        let now = self.shared.clock.now();
        // Gone now: a transport that kept its tasks in this process lost them; peers and the
        // restart send them again at once.
        if let Err(e) = self
            .shared
            .store
            .beat_driver(&self.shared.config.owner, now, now)
            .await
        {
            tracing::warn!(error = %e, "could not mark this driver gone; its heartbeat lapses on its own");
        }
        match self
            .shared
            .store
            .release_leases(&self.shared.config.owner, now)
            .await
        {
            Ok(n) if n > 0 => tracing::info!(released = n, "released run leases"),
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(error = %e, "could not release leases; they expire on their own")
            }
        }
    }

    /// The namespace this engine polls, `None` for an operator (every namespace).
    pub fn namespace(&self) -> Option<&Namespace> {
        self.shared.config.namespace.as_ref()
    }

    /// The namespace a start that names none is stamped with.
    pub fn stamp_namespace(&self) -> Namespace {
        self.shared.config.namespace.clone().unwrap_or_default()
    }

    /// The code this engine runs.
    pub fn registry(&self) -> &Registry {
        &self.shared.registry
    }

    /// The store this engine drives.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.shared.store
    }

    /// The transport this engine uses.
    pub fn transport(&self) -> &Arc<dyn Transport> {
        &self.shared.transport
    }

    /// Sends signal `name` with `payload` to run `id`, if `scope` sees it. The signal is
    /// buffered until the run waits for it, so it is never lost to timing.
    pub async fn signal(
        &self,
        scope: &Scope,
        id: &RunId,
        name: &str,
        payload: Value,
    ) -> Result<SignalSent, EngineError> {
        check_signal_name(name)?;
        check_payload("the signal's payload", &payload)?;
        let sent = self
            .shared
            .store
            .send_signal(scope, id, name, &payload, self.shared.clock.now())
            .await?;
        if let SignalSent::Delivered(run) = &sent {
            self.shared.wake.notify_one();
            self.shared
                .emit(run, TenantEventKind::for_status(run.status), None);
        }
        Ok(sent)
    }

    /// Cancels run `id` if `scope` sees it: a waiting run is `cancelled` at once; a run whose
    /// turn is executing goes `cancelling` and is `cancelled` when that turn ends.
    pub async fn cancel(&self, scope: &Scope, id: &RunId) -> Result<Control, EngineError> {
        let store = &self.shared.store;
        let now = self.shared.clock.now();
        let reason = StepFailure::new("cancelled by request").with_code("cancelled");
        let waiting = [RunStatus::Pending, RunStatus::Suspended, RunStatus::Blocked];
        let patch = RunPatch {
            status: RunStatus::Cancelled,
            error: Some(reason.clone()),
        };
        let run = match store.update_run_if(scope, id, &waiting, patch, now).await? {
            Some(run) => Some(run),
            None => {
                let patch = RunPatch {
                    status: RunStatus::Cancelling,
                    error: Some(reason),
                };
                store
                    .update_run_if(scope, id, &[RunStatus::Running], patch, now)
                    .await?
            }
        };
        if let Some(run) = &run {
            self.shared.announce_cancel(&run.id).await;
        }
        self.controlled(scope, id, run).await
    }

    /// Re-drives a failed or dead run from its last good checkpoint.
    pub async fn retry(&self, scope: &Scope, id: &RunId) -> Result<Control, EngineError> {
        let run = self
            .shared
            .store
            .retry_run(scope, id, self.shared.clock.now())
            .await?;
        let control = self.controlled(scope, id, run).await?;
        self.shared.wake.notify_one();
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
            .shared
            .store
            .update_run_if(
                scope,
                id,
                &[RunStatus::Blocked],
                patch,
                self.shared.clock.now(),
            )
            .await?;
        let control = self.controlled(scope, id, run).await?;
        self.shared.wake.notify_one();
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
        let store = &self.shared.store;
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
                        && cp.wake_at.is_none_or(|at| at <= self.shared.clock.now())
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
            redispatch::send_again(&self.shared, &run.namespace, cp, self.shared.clock.now())
                .await?;
        }
        tracing::info!(run_id = %run.id, steps = n, "redispatched on request");
        Ok((Control::Done(run), n))
    }

    /// Starts a new run of the same workflow with edited `input`, stamped with the original's
    /// namespace (whoever asks) and `retry_of` the original, which is left untouched.
    pub async fn retry_with_input(
        &self,
        scope: &Scope,
        id: &RunId,
        input: Value,
    ) -> Result<Control, EngineError> {
        check_payload("the input", &input)?;
        let Some(original) = self.shared.store.get_run(scope, id).await? else {
            return Ok(Control::NotFound);
        };
        let registry = &self.shared.registry;
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
        let run = self.create(new, start::IdOrigin::Generated).await?;
        Ok(Control::Done(run))
    }

    async fn controlled(
        &self,
        scope: &Scope,
        id: &RunId,
        changed: Option<Run>,
    ) -> Result<Control, EngineError> {
        match changed {
            Some(run) => {
                self.shared
                    .emit(&run, TenantEventKind::for_status(run.status), None);
                Ok(Control::Done(run))
            }
            None => Ok(match self.shared.store.get_run(scope, id).await? {
                Some(run) => Control::WrongStatus(run),
                None => Control::NotFound,
            }),
        }
    }

    /// Inserts a new run and announces it to its tenant. With a free turn slot, the run's first
    /// turn is planned and persisted with the insert (see [`start`]), or, if it cannot be
    /// planned, the run is inserted already claimed and its first turn starts here at once;
    /// otherwise the drive loop is poked.
    async fn create(&self, new: NewRun, id: start::IdOrigin) -> Result<Run, EngineError> {
        let shared = &self.shared;
        let (new, slot) = match shared.try_turn_slot() {
            Some(slot) => {
                // A task of its own, so that a caller that gives up (a client hanging up) cannot
                // stop it halfway: once its first steps left, the start is carried through.
                let shared = shared.clone();
                let started =
                    tokio::spawn(
                        async move { start::with_first_turn(&shared, new, id, slot).await },
                    )
                    .await;
                match started {
                    Ok(started) => match started? {
                        start::Started::Run(run) => return Ok(run),
                        start::Started::Unplanned(new, slot) => (new, Some(slot)),
                    },
                    Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                    Err(_) => return Err(EngineError::ShuttingDown),
                }
            }
            None => (new, None),
        };
        let claim = slot.as_ref().map(|_| shared.claim());
        let run = shared
            .store
            .create_run(new, shared.clock.now(), claim.as_ref())
            .await?;
        shared.emit(&run, TenantEventKind::RunStarted, None);
        match slot {
            // A new run has no history yet: its first turn needs no read.
            Some(slot) if run.status == RunStatus::Running => {
                let first = drive::FirstTurn::Claimed(Some(History::default()));
                drive::spawn_turns(shared.clone(), run.clone(), first, slot)
            }
            _ => shared.wake.notify_one(),
        }
        Ok(run)
    }

    /// Starts a top-level run of the newest registered version of `req.workflow`, or of a
    /// workflow a live worker on the run's partition announces (its turns then run there).
    pub async fn start_run(&self, req: StartRun) -> Result<Run, EngineError> {
        check_start(&req)?;
        let registry = &self.shared.registry;
        let namespace = req.namespace.unwrap_or_else(|| self.stamp_namespace());
        let version = match registry.latest(&req.workflow) {
            Some(workflow) => workflow.version,
            None if remote::served(&self.shared, &req.workflow, &namespace).await => 1,
            None => {
                return Err(EngineError::UnknownWorkflow(
                    req.workflow.clone(),
                    registry.workflow_names().join(", "),
                ));
            }
        };
        let (id, origin) = match req.id {
            Some(id) => (id, start::IdOrigin::Chosen),
            None => (RunId::generate(), start::IdOrigin::Generated),
        };
        let mut new = NewRun::top_level(id.clone(), namespace, &req.workflow, version, req.input);
        new.tags = req.tags;
        new.search_attributes = req.search_attributes;
        match self.create(new, origin).await {
            Err(EngineError::Store(StoreError::Conflict(_))) => Err(EngineError::RunExists(id)),
            started => started,
        }
    }
}
