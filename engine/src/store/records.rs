use serde_json::{Map, Value};

use crate::model::{
    BufferedSignal, Checkpoint, CheckpointKind, CheckpointStatus, ConcurrencySlot, Millis,
    Namespace, RetryPolicy, Run, RunId, RunStatus, Saga, Scope, StepFailure, StepRoute,
    StoredUpdate,
};

/// Everything needed to insert a run. Lineage is explicit so that children, retries and
/// successors are stamped from their origin's record.
#[derive(Clone, Debug, PartialEq)]
pub struct NewRun {
    /// The id (fresh for top-level runs, deterministic for children).
    pub id: RunId,
    /// The namespace to stamp; already resolved by the caller's stamping rule.
    pub namespace: Namespace,
    /// Workflow name.
    pub workflow: String,
    /// Pinned version.
    pub workflow_version: u32,
    /// Input.
    pub input: Value,
    /// Labels.
    pub tags: Vec<String>,
    /// Flat scalar attributes.
    pub search_attributes: Map<String, Value>,
    /// Parent, for a child.
    pub parent_run_id: Option<RunId>,
    /// Root of the tree (its own id at the top).
    pub root_run_id: RunId,
    /// Depth in the child tree.
    pub nesting_depth: u32,
    /// The run this retries with edited input.
    pub retry_of: Option<RunId>,
    /// The run this continues.
    pub continued_from: Option<RunId>,
    /// The workflow concurrency limit it starts under (top-level runs only).
    pub concurrency: Option<ConcurrencySlot>,
    /// When the run times out, if it has a timeout: past it, it fails wherever it waits.
    pub deadline_at: Option<Millis>,
    /// The W3C trace context the run's trace continues: the start request's, or the turn's
    /// that started it (a child, a successor). `None` with tracing off.
    pub traceparent: Option<String>,
}

impl NewRun {
    /// A top-level run with no lineage.
    pub fn top_level(
        id: RunId,
        namespace: Namespace,
        workflow: impl Into<String>,
        workflow_version: u32,
        input: Value,
    ) -> Self {
        NewRun {
            root_run_id: id.clone(),
            id,
            namespace,
            workflow: workflow.into(),
            workflow_version,
            input,
            tags: Vec::new(),
            search_attributes: Map::new(),
            parent_run_id: None,
            nesting_depth: 0,
            retry_of: None,
            continued_from: None,
            concurrency: None,
            deadline_at: None,
            traceparent: None,
        }
    }
}

/// A checkpoint written by a turn.
#[derive(Clone, Debug, PartialEq)]
pub struct NewCheckpoint {
    /// Position.
    pub seq: u32,
    /// Kind.
    pub kind: CheckpointKind,
    /// Name.
    pub name: String,
    /// Initial status (`pending` for dispatched work, resolved for recorded local steps).
    pub status: CheckpointStatus,
    /// Routing token for a remote step.
    pub worker_group: Option<String>,
    /// Input.
    pub input: Option<Value>,
    /// Output of a resolved local step.
    pub output: Option<Value>,
    /// Error of a failed local step.
    pub error: Option<StepFailure>,
    /// Timer due time.
    pub wake_at: Option<Millis>,
    /// Dispatch time of a remote step.
    pub enqueued_at: Option<Millis>,
    /// Start of a local step.
    pub started_at: Option<Millis>,
    /// End of a local step.
    pub finished_at: Option<Millis>,
    /// How a failed remote step is retried.
    pub retry_policy: Option<RetryPolicy>,
    /// How long one try of a remote step may take.
    pub timeout_ms: Option<u64>,
    /// A remote step's priority among its step's waiting tasks.
    pub priority: Option<i64>,
    /// The concurrency slots a remote step's dispatch holds.
    pub slot: Option<String>,
    /// What undoes the step, or which step it undoes.
    pub saga: Option<Saga>,
    /// Where a remote step or turn was routed and what decided it.
    pub route: Option<StepRoute>,
}

impl NewCheckpoint {
    /// A remote step sent to the workers of routing token `group` at `enqueued_at`, waiting for
    /// its result (tried once, with no time limit, unless the caller sets a retry policy or a
    /// timeout).
    pub fn remote_step(
        seq: u32,
        name: String,
        group: String,
        input: Value,
        enqueued_at: Millis,
    ) -> Self {
        NewCheckpoint {
            seq,
            kind: CheckpointKind::RemoteStep,
            name,
            status: CheckpointStatus::Pending,
            worker_group: Some(group),
            input: Some(input),
            output: None,
            error: None,
            wake_at: None,
            enqueued_at: Some(enqueued_at),
            started_at: None,
            finished_at: None,
            retry_policy: None,
            timeout_ms: None,
            priority: None,
            slot: None,
            saga: None,
            route: None,
        }
    }

    /// A local step (or captured value) that already ran: `failed` when it has an `error`.
    /// `now#<seq>` and `sideEffect` are captured values, as the aviary wire names them.
    pub fn recorded_step(
        seq: u32,
        name: String,
        output: Option<Value>,
        error: Option<StepFailure>,
        started_at: Millis,
        finished_at: Millis,
    ) -> Self {
        let kind = CheckpointKind::of_recorded(&name);
        NewCheckpoint {
            seq,
            kind,
            name,
            status: if error.is_some() {
                CheckpointStatus::Failed
            } else {
                CheckpointStatus::Completed
            },
            worker_group: None,
            input: None,
            output,
            error,
            wake_at: None,
            enqueued_at: None,
            started_at: Some(started_at),
            finished_at: Some(finished_at),
            retry_policy: None,
            timeout_ms: None,
            priority: None,
            slot: None,
            saga: None,
            route: None,
        }
    }
}

/// Where a run goes after a turn.
#[derive(Clone, Debug, PartialEq)]
pub enum TurnOutcome {
    /// Waiting; look again at `wake_at` (or when a result wakes it).
    Suspend {
        /// Earliest timer, if any.
        wake_at: Option<Millis>,
    },
    /// Finished with this output.
    Complete(Value),
    /// Finished with this error.
    Fail(StepFailure),
    /// Failed (or cancelled) with this error, and every compensation ran.
    Compensated(StepFailure),
    /// A compensation failed for good, with this error.
    CompensationFailed(StepFailure),
    /// Parked: nobody can run it now. With no `recheck_at` it waits to be un-parked (a process
    /// serving its version starts); with one, it goes back to `pending` then and its next turn
    /// looks again (a dispatch no live worker could take).
    Block {
        /// Why, as the run shows it.
        reason: StepFailure,
        /// When to look again.
        recheck_at: Option<Millis>,
    },
    /// Ended as `continued`; this successor is started in the same transaction.
    Continue(Box<NewRun>),
}

/// A remote step whose retry came due, sent again: its routing was decided again (a rule
/// edited meanwhile, or a fallback pool standing in), and its checkpoint says where it went.
#[derive(Clone, Debug, PartialEq)]
pub struct Redispatch {
    /// The step's position.
    pub seq: u32,
    /// The routing token the retry was sent on.
    pub worker_group: String,
    /// Why it went there, when something chose (see [`StepRoute`]).
    pub route: Option<StepRoute>,
}

/// The durable effect of one turn.
#[derive(Clone, Debug, PartialEq)]
pub struct TurnCommit {
    /// Checkpoints to insert.
    pub checkpoints: Vec<NewCheckpoint>,
    /// Remote steps whose retry came due and were dispatched again, where routing sent them
    /// this time.
    pub redispatched: Vec<Redispatch>,
    /// Pending timers (by `seq`) the turn found due: they are marked completed.
    pub fired_timers: Vec<u32>,
    /// Buffered signals the turn consumed, as `(signal id, seq of the wait)`: each is marked
    /// consumed and its wait's checkpoint completed with the payload.
    pub consumed_signals: Vec<(i64, u32)>,
    /// Signal waits (by `seq`) whose timeout passed: their checkpoints fail with `timeout`.
    pub timed_out_signals: Vec<u32>,
    /// Remote steps (by `seq`) whose try outlived its timeout: the try fails with `timeout` and
    /// is retried by the step's policy; the run turns again at once to see the outcome.
    pub timed_out_steps: Vec<u32>,
    /// Child runs to start (an existing id is kept: a replay never starts a child twice).
    pub children: Vec<NewRun>,
    /// Runs (this run's children) to cancel: waiting ones end `cancelled`, running ones go
    /// `cancelling`.
    pub cancel_runs: Vec<RunId>,
    /// The run's search attributes after the ones it set from inside this turn, if it set any.
    pub search_attributes: Option<Map<String, Value>>,
    /// The dead-letter run to start because this turn fails the run (its id already taken
    /// means it was started before).
    pub dead_letter: Option<NewRun>,
    /// The run's next state.
    pub outcome: TurnOutcome,
}

/// The new state of a run for [`super::Store::update_run_if`].
#[derive(Clone, Debug, PartialEq)]
pub struct RunPatch {
    /// The status to move to.
    pub status: RunStatus,
    /// The error to record (kept when `None`).
    pub error: Option<StepFailure>,
}

impl TurnCommit {
    /// Whether this commit only adds checkpoints and moves the run, changing nothing already
    /// written. The history after it is then the one the turn replayed plus its new checkpoints
    /// ([`History::appended`]), so a store does not read it back for a run that suspends: on
    /// PostgreSQL that read is one of the few round trips of the hottest write.
    pub fn only_appends(&self) -> bool {
        self.redispatched.is_empty()
            && self.fired_timers.is_empty()
            && self.consumed_signals.is_empty()
            && self.timed_out_signals.is_empty()
            && self.timed_out_steps.is_empty()
            && self.children.is_empty()
            && self.cancel_runs.is_empty()
            && self.search_attributes.is_none()
            && self.dead_letter.is_none()
    }

    /// A commit with `outcome` and nothing else to persist.
    pub fn new(outcome: TurnOutcome) -> Self {
        TurnCommit {
            checkpoints: Vec::new(),
            redispatched: Vec::new(),
            fired_timers: Vec::new(),
            consumed_signals: Vec::new(),
            timed_out_signals: Vec::new(),
            timed_out_steps: Vec::new(),
            children: Vec::new(),
            cancel_runs: Vec::new(),
            search_attributes: None,
            dead_letter: None,
            outcome,
        }
    }
}

/// What sending a signal did.
#[derive(Clone, Debug)]
pub enum SignalSent {
    /// Buffered for the run (and the run woken).
    Delivered(Run),
    /// The run already ended; nothing was stored.
    RunFinished(Run),
    /// No visible run with that id.
    NotFound,
}

/// What sending an update did.
#[derive(Clone, Debug)]
pub enum UpdateSent {
    /// Kept with the run, its argument buffered as a signal (and the run woken).
    Delivered(Run),
    /// An update under that id was kept before: it, and nothing new.
    Repeated(StoredUpdate),
    /// The run already ended; nothing was stored.
    RunFinished(Run),
    /// No visible run with that id.
    NotFound,
}

/// What delivering an event did.
#[derive(Clone, Debug, PartialEq)]
pub enum EventDelivered {
    /// Delivered now, to these runs (woken).
    Delivered(Vec<RunId>),
    /// Delivered before under its id, to this many runs; nothing new now.
    Repeated(u32),
}

/// A run that needs a turn, as the claim loop's fair pick sees it (see
/// [`crate::store::Leases::runnable_runs`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Runnable {
    /// The run.
    pub id: RunId,
    /// Its tenant: the first tier of the pick.
    pub namespace: Namespace,
    /// Its workflow: with its concurrency key, the second tier, so a tenant's backlog spread
    /// over many workflows buys it nothing against other tenants, and within the tenant each
    /// workflow (and each key of a keyed workflow) takes its turn.
    pub workflow: String,
    /// Its workflow concurrency key, if its workflow has a limit.
    pub concurrency_key: Option<String>,
    /// Since when it needs its turn (its timer, or its creation).
    pub due: Millis,
    /// Whether it is a top-level run never started: the kind a concurrency ceiling holds back.
    pub fresh: bool,
}

/// A driver's lease, offered with a write that may make a run runnable, so the run is claimed
/// in that same transaction instead of in a separate claim round trip.
#[derive(Clone, Debug, PartialEq)]
pub struct Claim {
    /// The namespaces the driver may claim runs of.
    pub scope: Scope,
    /// The lease holder.
    pub owner: String,
    /// When the lease runs out unless renewed.
    pub until: Millis,
}

/// What a run's next turn replays, read in the same transaction that claimed the run, so the
/// turn needs no read of its own.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct History {
    /// The run's checkpoints in `seq` order.
    pub checkpoints: Vec<Checkpoint>,
    /// Its buffered, unconsumed signals in delivery order.
    pub signals: Vec<BufferedSignal>,
}

impl History {
    /// This history of run `id` after a commit that [`TurnCommit::only_appends`] `checkpoints`,
    /// as the store then holds it: a new checkpoint at a position already taken is not written.
    pub fn appended(mut self, id: &RunId, checkpoints: &[NewCheckpoint]) -> History {
        for cp in checkpoints {
            if self.checkpoints.iter().any(|c| c.seq == cp.seq) {
                continue;
            }
            self.checkpoints.push(Checkpoint {
                run_id: id.clone(),
                seq: cp.seq,
                kind: cp.kind,
                name: cp.name.clone(),
                status: cp.status,
                attempts: 1,
                worker_group: cp.worker_group.clone(),
                input: cp.input.clone(),
                output: cp.output.clone(),
                error: cp.error.clone(),
                wake_at: cp.wake_at,
                enqueued_at: cp.enqueued_at,
                started_at: cp.started_at,
                finished_at: cp.finished_at,
                retry_policy: cp.retry_policy.clone(),
                timeout_ms: cp.timeout_ms,
                priority: cp.priority,
                slot: cp.slot.clone(),
                saga: cp.saga.clone(),
                route: cp.route.clone(),
            });
        }
        self.checkpoints.sort_by_key(|c| c.seq);
        self
    }
}

/// A turn that was persisted.
#[derive(Clone, Debug)]
pub struct Committed {
    /// The run after the turn: `running` when it was woken during the turn and stays claimed
    /// for another.
    pub run: Run,
    /// The run's history after the commit while the run lives on (`running`: what its next turn
    /// replays; `suspended`: what a driver may cache to replay the next turn without a read).
    /// `None` for a suspended run whose commit [`TurnCommit::only_appends`]: the caller derives
    /// it with [`History::appended`].
    pub history: Option<History>,
    /// The runs the commit cancelled or set `cancelling` (a fail-fast gather's children, a
    /// child that continued as new as its live successor): the ones whose steps in flight are
    /// told to stop.
    pub cancelled: Vec<RunId>,
}

/// A result that was accepted, with the run it woke.
#[derive(Clone, Debug)]
pub struct StepApplied {
    /// The run after the wake-up: `running` under the offered [`Claim`] when it was claimed.
    pub run: Run,
    /// `Some` when the run was claimed for the caller, who now owes it a turn: what that turn
    /// replays.
    pub claimed: Option<History>,
    /// The checkpoint after the result.
    pub checkpoint: Checkpoint,
}

/// Which waiting remote steps [`super::Store::pending_remote_steps`] returns: those whose
/// dispatch may be lost, and so must be sent again.
#[derive(Clone, Debug, PartialEq)]
pub struct LostDispatch {
    /// Steps last sent at or before this, and retries due by then that no turn has sent yet.
    pub sent_before: Millis,
    /// `Some(owner)`: of those, only the ones `owner` sent. A transport that keeps its tasks in
    /// the sender's memory sets it: a live peer still holds the tasks it sent, and sending them
    /// again here would run them twice.
    pub only_sent_by: Option<String>,
    /// `Some(now)`: also every step, however recent, whose sender's heartbeat
    /// ([`super::Store::beat_driver`]) had lapsed by `now`, or that names no sender: with a
    /// transport that keeps tasks in memory, they died with that process.
    pub senders_gone_at: Option<Millis>,
}

impl LostDispatch {
    /// Steps sent at or before `sent_before` by anyone (a transport that keeps its tasks, such
    /// as Redis, where any control plane may send a lost one again).
    pub fn sent_before(sent_before: Millis) -> Self {
        LostDispatch {
            sent_before,
            only_sent_by: None,
            senders_gone_at: None,
        }
    }
}

/// A remote step out now that holds concurrency slots: whose lease the sweep renews.
#[derive(Clone, Debug, PartialEq)]
pub struct SlotOut {
    /// Its run's tenant, whose slots it holds.
    pub namespace: Namespace,
    /// Its run.
    pub run_id: RunId,
    /// Its place in the run.
    pub seq: u32,
    /// The counter whose slot it holds.
    pub slot: String,
}

/// A remote step whose result has not arrived, with what is needed to dispatch it again.
#[derive(Clone, Debug)]
pub struct PendingStep {
    /// The run's namespace, which picks the routing partition.
    pub namespace: Namespace,
    /// The checkpoint.
    pub checkpoint: Checkpoint,
}
