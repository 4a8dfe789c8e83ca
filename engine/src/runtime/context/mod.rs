//! The authoring API: what workflow and step code receives.

mod queries;
mod step;

pub use step::StepContext;

use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::error::decode;
use super::handlers::Handlers;
use super::turn_state::TurnState;
use super::{Clock, Command, Operation, StepError, StepOptions, WorkflowError};
use crate::model::{
    ATTRIBUTES_MARKER, BufferedSignal, COMPENSATE_SIGNAL, Checkpoint, CheckpointKind,
    CheckpointStatus, Millis, Namespace, PATCH_MARKER, PoolName, RetryPolicy, RunId, Saga,
    StepFailure, StepFlow,
};

/// Handed to every workflow body. Each durable operation takes the next position (`seq`) in the
/// run when it is created (see [`Operation`]); on replay a resolved position returns its recorded
/// value instead of running again.
///
/// Workflow code must be deterministic: the same history must lead it to create the same
/// operations in the same order. Anything else (time, randomness, IO) goes through a step.
#[derive(Clone)]
pub struct WorkflowContext {
    run_id: RunId,
    namespace: Namespace,
    state: Arc<Mutex<TurnState>>,
    clock: Arc<dyn Clock>,
}

enum Replay {
    Resolved(Box<Checkpoint>),
    Waiting,
    New,
}

impl WorkflowContext {
    pub(crate) fn new(
        run_id: RunId,
        namespace: Namespace,
        history: Vec<Checkpoint>,
        signals: Vec<BufferedSignal>,
        now: Millis,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let history = history.into_iter().map(|c| (c.seq, c)).collect();
        WorkflowContext {
            run_id,
            namespace,
            clock,
            state: Arc::new(Mutex::new(TurnState {
                next_seq: 0,
                history,
                commands: Vec::new(),
                nondeterminism: None,
                local_in_flight: 0,
                defer_local: false,
                deferred_local: false,
                awaiting: 0,
                now,
                next_wake: None,
                signals,
                handlers: Handlers::default(),
            })),
        }
    }

    pub(crate) fn state(&self) -> MutexGuard<'_, TurnState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether the run was cancelled with compensation (its next turns compensate).
    pub(crate) fn compensation_requested(&self) -> bool {
        self.state()
            .signals
            .iter()
            .any(|s| s.name == COMPENSATE_SIGNAL)
    }

    /// What compensating the run means now that its body took the positions before `base`: the
    /// steps to undo (position, undoing step, its input), newest first, or `None` while a step
    /// that would be undone is still out (its result decides whether it is undone).
    pub(crate) fn to_undo(&self, base: u32) -> Option<Vec<(u32, String, Value)>> {
        let st = self.state();
        let mut undo = Vec::new();
        for cp in st.history.values().filter(|cp| cp.seq < base) {
            let Some(Saga::Undo { step, input }) = &cp.saga else {
                continue;
            };
            match cp.status {
                CheckpointStatus::Completed => undo.push((cp.seq, step.clone(), input.clone())),
                CheckpointStatus::Failed => {}
                CheckpointStatus::Pending | CheckpointStatus::Running => return None,
            }
        }
        undo.sort_by_key(|u| std::cmp::Reverse(u.0));
        Some(undo)
    }

    /// The position the next operation takes.
    pub(crate) fn next_seq(&self) -> u32 {
        self.state().next_seq
    }

    /// Takes the compensations out of the history, so the body replays without them: it
    /// starts nothing new while compensating, so the positions they hold are free for it.
    pub(crate) fn take_compensations(&self) -> Vec<Checkpoint> {
        let mut st = self.state();
        let seqs: Vec<u32> = st
            .history
            .values()
            .filter(|cp| matches!(cp.saga, Some(Saga::Undoes(_))))
            .map(|cp| cp.seq)
            .collect();
        seqs.into_iter()
            .filter_map(|seq| st.history.remove(&seq))
            .collect()
    }

    /// Puts `compensations` back and has the next operation take position `base`, where the
    /// first of them is (or will be).
    pub(crate) fn resume_compensations(&self, compensations: Vec<Checkpoint>, base: u32) {
        let mut st = self.state();
        for cp in compensations {
            st.history.insert(cp.seq, cp);
        }
        st.next_seq = base;
    }

    /// The run being executed.
    pub fn run_id(&self) -> &RunId {
        &self.run_id
    }

    /// The run's namespace (its tenant).
    pub fn namespace(&self) -> &Namespace {
        &self.namespace
    }

    /// Takes the next position and compares the history there with what the code asks for.
    fn replay(&self, kind: CheckpointKind, name: &str) -> (u32, Replay) {
        let mut st = self.state();
        let seq = st.next_seq;
        st.next_seq += 1;
        let Some(cp) = st.history.get(&seq).cloned() else {
            return (seq, Replay::New);
        };
        // A checkpoint without a name (the wire's history leaves signal and child names out)
        // matches by kind and position alone.
        if cp.kind != kind || (!cp.name.is_empty() && cp.name != name) {
            if st.nondeterminism.is_none() {
                st.nondeterminism = Some(WorkflowError::NonDeterminism {
                    run_id: self.run_id.clone(),
                    seq,
                    expected: format!("{}/{}", cp.kind.as_str(), cp.name),
                    found: format!("{}/{name}", kind.as_str()),
                });
            }
            return (seq, Replay::Waiting);
        }
        if cp.status.is_resolved() {
            (seq, Replay::Resolved(Box::new(cp)))
        } else {
            (seq, Replay::Waiting)
        }
    }

    /// Runs step `name` on a worker serving `name@<partition>` (the partition is the run's
    /// namespace), with `step_id = "<run_id>:<seq>"` as its idempotency key, retried by the
    /// default [`RetryPolicy`]. Completed steps are never executed again on replay.
    pub fn step<I, O>(&self, name: &str, input: &I) -> Operation<Result<O, StepError>>
    where
        I: Serialize + ?Sized,
        O: DeserializeOwned,
    {
        self.step_with(name, input, RetryPolicy::default())
    }

    /// [`WorkflowContext::step`] with explicit [`StepOptions`] (or just a [`RetryPolicy`]): a
    /// try with no result within `timeout` fails with code `timeout` and is retried by the policy.
    pub fn step_with<I, O>(
        &self,
        name: &str,
        input: &I,
        options: impl Into<StepOptions>,
    ) -> Operation<Result<O, StepError>>
    where
        I: Serialize + ?Sized,
        O: DeserializeOwned,
    {
        let StepOptions {
            retry,
            timeout,
            mut flow,
            saga,
            pool,
        } = options.into();
        let timeout_ms = timeout.map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX));
        let (seq, replay) = self.replay(CheckpointKind::RemoteStep, name);
        if !matches!(replay, Replay::Resolved(_))
            && let Some(pool) = pool
        {
            match PoolName::parse(&pool) {
                Ok(pool) => flow.pool = Some(pool),
                Err(e) => {
                    return Operation::ready(Err(StepError::fatal(format!(
                        "step `{name}` names a pool that cannot be one: {e}"
                    ))
                    .with_code("bad_pool")));
                }
            }
        }
        match replay {
            Replay::Resolved(cp) => Operation::ready(resolved(*cp, name)),
            Replay::Waiting => {
                self.plan_waiting_step(seq, name, flow);
                Operation::suspended(&self.state)
            }
            Replay::New => {
                let input = match serde_json::to_value(input) {
                    Ok(input) => input,
                    Err(e) => {
                        return Operation::ready(Err(StepError::fatal(format!(
                            "the input of step `{name}` cannot be serialised: {e}"
                        ))));
                    }
                };
                {
                    let mut st = self.state();
                    if let Some(ms) = timeout_ms {
                        let at = st.now.saturating_add(i64::try_from(ms).unwrap_or(i64::MAX));
                        st.wake_by(at);
                    }
                    st.commands.push(Command::Call {
                        seq,
                        name: name.to_owned(),
                        input,
                        retry: Some(retry),
                        timeout_ms,
                        flow,
                        saga,
                    });
                }
                Operation::suspended(&self.state)
            }
        }
    }

    /// A remote step still waiting: a retry waiting out its backoff (no dispatch time) is
    /// dispatched once due; a dispatched try that outlived its timeout is timed out; otherwise
    /// the run wakes for whichever comes first.
    fn plan_waiting_step(&self, seq: u32, name: &str, flow: StepFlow) {
        let mut st = self.state();
        if st.nondeterminism.is_some() {
            return;
        }
        let Some(cp) = st.history.get(&seq) else {
            return;
        };
        let (sent, due, timeout, attempts) =
            (cp.enqueued_at, cp.wake_at, cp.timeout_ms, cp.attempts);
        let input = cp.input.clone().unwrap_or(Value::Null);
        match (sent, due) {
            (Some(sent), _) => {
                let Some(ms) = timeout else {
                    return;
                };
                let deadline = sent.saturating_add(i64::try_from(ms).unwrap_or(i64::MAX));
                if deadline <= st.now {
                    st.commands.push(Command::StepTimedOut { seq });
                } else {
                    st.wake_by(deadline);
                }
            }
            (None, Some(at)) if at > st.now => st.wake_by(at),
            (None, _) => {
                // Dispatched again now: its timeout counts from now.
                if let Some(ms) = timeout {
                    let deadline = st.now.saturating_add(i64::try_from(ms).unwrap_or(i64::MAX));
                    st.wake_by(deadline);
                }
                st.commands.push(Command::RetryStep {
                    seq,
                    name: name.to_owned(),
                    input,
                    attempt: attempts,
                    flow,
                });
            }
        }
    }

    /// Runs `f` in this process as step `name`, records its result, and replays the record
    /// afterwards. If the process dies while `f` runs, `f` runs again: make it idempotent.
    /// Like every operation it takes its position when it is created; `f` runs when it is first
    /// awaited.
    pub fn local_step<O, F, Fut>(
        &self,
        name: &str,
        f: F,
    ) -> impl Future<Output = Result<O, StepError>> + use<O, F, Fut>
    where
        O: Serialize + DeserializeOwned,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<O, StepError>>,
    {
        let (seq, replay) = self.replay(CheckpointKind::LocalStep, name);
        let ready = match replay {
            Replay::Resolved(cp) => Some(resolved(*cp, name)),
            Replay::Waiting | Replay::New => None,
        };
        let wait = ready.is_none() && {
            let mut st = self.state();
            st.deferred_local |= st.defer_local;
            st.nondeterminism.is_some() || st.deferred_local
        };
        let (ctx, name) = (self.clone(), name.to_owned());
        async move {
            if let Some(result) = ready {
                return result;
            }
            if wait {
                return Operation::suspended(&ctx.state).await;
            }
            ctx.run_local(seq, &name, f).await
        }
    }

    /// Runs a local step's `f` now, counted as in flight so the turn waits for it, and queues
    /// its record.
    async fn run_local<O, F, Fut>(&self, seq: u32, name: &str, f: F) -> Result<O, StepError>
    where
        O: Serialize,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<O, StepError>>,
    {
        let started_at = self.clock.now();
        let guard = InFlight::enter(self);
        let result = f().await;
        drop(guard);
        let finished_at = self.clock.now();
        let (output, error) = match &result {
            Ok(out) => match serde_json::to_value(out) {
                Ok(v) => (Some(v), None),
                Err(e) => (
                    None,
                    Some(
                        StepFailure::new(format!(
                            "the output of step `{name}` cannot be serialised: {e}"
                        ))
                        .fatal(),
                    ),
                ),
            },
            Err(e) => (None, Some(e.0.clone())),
        };
        self.state().commands.push(Command::RecordStep {
            seq,
            name: name.to_owned(),
            output,
            error,
            started_at,
            finished_at,
        });
        result
    }
}

impl WorkflowContext {
    /// Suspends the run durably for `duration`. The timer survives restarts: a run whose timer
    /// came due while no process was up resumes as soon as one starts.
    pub fn sleep(&self, duration: std::time::Duration) -> Operation<()> {
        let ms = u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
        self.timer(ms)
    }

    /// Suspends the run durably until `at` (epoch milliseconds); returns at once if it passed.
    pub fn sleep_until(&self, at: Millis) -> Operation<()> {
        let now = self.state().now;
        self.timer(u64::try_from(at - now).unwrap_or(0))
    }

    fn timer(&self, ms: u64) -> Operation<()> {
        let seq = self.state().next_seq;
        let name = format!("sleep:{seq}");
        let (seq, replay) = self.replay(CheckpointKind::Sleep, &name);
        let wait = match replay {
            Replay::Resolved(_) => false,
            Replay::Waiting => {
                let mut st = self.state();
                match st.history.get(&seq).and_then(|c| c.wake_at) {
                    // Due: fire it in this turn and carry on.
                    Some(at) if at <= st.now && st.nondeterminism.is_none() => {
                        st.commands.push(Command::FireTimer { seq });
                        false
                    }
                    Some(at) => {
                        st.wake_by(at);
                        true
                    }
                    None => true,
                }
            }
            Replay::New => {
                let mut st = self.state();
                let at = st.now.saturating_add(i64::try_from(ms).unwrap_or(i64::MAX));
                st.commands.push(Command::Sleep { seq, ms });
                st.wake_by(at);
                true
            }
        };
        if wait {
            Operation::suspended(&self.state)
        } else {
            Operation::ready(())
        }
    }

    /// Waits for signal `name` sent to this run, for at most `timeout` (forever when `None`).
    /// Returns its payload, or `None` on timeout. A signal sent before the wait is buffered and
    /// taken here; signals of one name are taken in the order they were sent.
    pub fn wait_signal<T: DeserializeOwned>(
        &self,
        name: &str,
        timeout: Option<std::time::Duration>,
    ) -> Operation<Result<Option<T>, StepError>> {
        self.wait_message(name, timeout, None)
    }

    /// Waits for the signal `name`, which `filter` (kept with the wait) may narrow: what
    /// [`WorkflowContext::wait_signal`] and [`WorkflowContext::wait_event`] share.
    pub(crate) fn wait_message<T: DeserializeOwned>(
        &self,
        name: &str,
        timeout: Option<std::time::Duration>,
        filter: Option<Value>,
    ) -> Operation<Result<Option<T>, StepError>> {
        let (seq, replay) = self.replay(CheckpointKind::Signal, name);
        let outcome = match replay {
            Replay::Resolved(cp) if cp.status == CheckpointStatus::Failed => SignalWait::TimedOut,
            Replay::Resolved(cp) => SignalWait::Got(cp.output.unwrap_or(Value::Null)),
            Replay::Waiting => {
                let mut st = self.state();
                let deadline = st.history.get(&seq).and_then(|c| c.wake_at);
                if st.nondeterminism.is_some() {
                    SignalWait::Suspend
                } else if let Some(payload) = st.take_signal(seq, name) {
                    SignalWait::Got(payload)
                } else if deadline.is_some_and(|at| at <= st.now) {
                    st.commands.push(Command::SignalTimedOut { seq });
                    SignalWait::TimedOut
                } else {
                    if let Some(at) = deadline {
                        st.wake_by(at);
                    }
                    SignalWait::Suspend
                }
            }
            Replay::New => {
                let mut st = self.state();
                if let Some(payload) = st.take_signal(seq, name) {
                    SignalWait::Got(payload)
                } else {
                    let timeout_ms =
                        timeout.map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX));
                    if let Some(ms) = timeout_ms {
                        let at = st.now.saturating_add(i64::try_from(ms).unwrap_or(i64::MAX));
                        st.wake_by(at);
                    }
                    st.commands.push(Command::WaitSignal {
                        seq,
                        signal: name.to_owned(),
                        timeout_ms,
                        filter,
                    });
                    SignalWait::Suspend
                }
            }
        };
        match outcome {
            SignalWait::Got(payload) => Operation::ready(
                decode(payload, &format!("the payload of signal `{name}`"))
                    .map(Some)
                    .map_err(|m| StepError::fatal(m).with_code("payload_mismatch")),
            ),
            SignalWait::TimedOut => Operation::ready(Ok(None)),
            SignalWait::Suspend => Operation::suspended(&self.state),
        }
    }

    /// Starts workflow `workflow` as a child run and waits for it to end: its output, or its
    /// failure as an error the parent may handle. The child id is `<run_id>.child.<seq>`, so a
    /// replayed parent finds the child it already started; the child belongs to the parent's
    /// namespace. Join several `child` futures to fan out.
    pub fn child<I, O>(&self, workflow: &str, input: &I) -> Operation<Result<O, StepError>>
    where
        I: Serialize + ?Sized,
        O: DeserializeOwned,
    {
        let (seq, replay) = self.replay(CheckpointKind::Child, workflow);
        match replay {
            Replay::Resolved(cp) => Operation::ready(resolved(*cp, workflow)),
            Replay::Waiting => Operation::suspended(&self.state),
            Replay::New => match serde_json::to_value(input) {
                Ok(input) => {
                    self.state().commands.push(Command::StartChild {
                        seq,
                        workflow: workflow.to_owned(),
                        input,
                    });
                    Operation::suspended(&self.state)
                }
                Err(e) => Operation::ready(Err(StepError::fatal(format!(
                    "the input of child `{workflow}` cannot be serialised: {e}"
                )))),
            },
        }
    }

    /// Fans out one child run per `(workflow, input)` and gathers their outputs in order.
    /// [`Gather::WaitAll`] waits for every child and fails with the first failure;
    /// [`Gather::FailFast`] fails as soon as one child fails and cancels the others.
    /// The children take their positions, in order, when this is called.
    pub fn gather_children<I, O>(
        &self,
        children: &[(&str, I)],
        mode: Gather,
    ) -> impl Future<Output = Result<Vec<O>, StepError>> + use<I, O>
    where
        I: Serialize,
        O: DeserializeOwned,
    {
        let first_seq = self.state().next_seq;
        let calls = children
            .iter()
            .map(|(workflow, input)| self.child::<I, O>(workflow, input))
            .collect::<Vec<_>>();
        // Each child took one position, in order.
        let seqs = first_seq..self.state().next_seq;
        let ctx = self.clone();
        async move {
            match mode {
                Gather::WaitAll => futures::future::join_all(calls).await.into_iter().collect(),
                Gather::FailFast => {
                    let result = futures::future::try_join_all(calls).await;
                    if result.is_err() {
                        ctx.cancel_unresolved_children(seqs);
                    }
                    result
                }
            }
        }
    }

    /// Cancels the children at `seqs` that have not ended.
    fn cancel_unresolved_children(&self, seqs: std::ops::Range<u32>) {
        let mut st = self.state();
        let ids = seqs
            .filter(|seq| st.history.get(seq).is_none_or(|c| !c.status.is_resolved()))
            .map(|seq| child_run_id(&self.run_id, seq))
            .collect::<Vec<_>>();
        st.commands
            .extend(ids.into_iter().map(|id| Command::CancelRun { id }));
    }

    /// Ends this run as `continued` and starts a successor of the same workflow with `input` and
    /// a clean history, in the same namespace and lineage. Return the result as the workflow's
    /// error: `return Err(ctx.continue_as_new(&next));`. Keeps long-lived loops from growing an
    /// unbounded history.
    pub fn continue_as_new<I: Serialize + ?Sized>(&self, input: &I) -> WorkflowError {
        match serde_json::to_value(input) {
            Ok(input) => WorkflowError::ContinueAsNew(input),
            Err(e) => {
                WorkflowError::msg(format!("the ContinueAsNew input cannot be serialised: {e}"))
            }
        }
    }

    /// Whether this run takes the code after change `id`, to change a workflow inside one
    /// version: `if ctx.patched("refund-first") { new } else { old }`. A run that reaches this
    /// point with the change deployed records so (a marker at this position) and answers `true`
    /// here on every replay; a run whose history went past this point before the change answers
    /// `false`, takes no position, and replays the old path as it ran. Once no run that started
    /// before the change is left, remove the old branch and keep the call (or bump the version).
    pub fn patched(&self, id: &str) -> bool {
        let name = format!("{PATCH_MARKER}{id}");
        let at = self.clock.now();
        let mut st = self.state();
        let seq = st.next_seq;
        match st.history.get(&seq) {
            Some(cp) if cp.kind == CheckpointKind::SideEffect && cp.name == name => {
                st.next_seq += 1;
                true
            }
            // The history holds what the old code did here.
            Some(_) => false,
            None => {
                st.next_seq += 1;
                st.commands.push(Command::RecordStep {
                    seq,
                    name,
                    output: Some(Value::Bool(true)),
                    error: None,
                    started_at: at,
                    finished_at: at,
                });
                true
            }
        }
    }

    /// Sets search attributes of this run from inside it, merged over those it has (a `null`
    /// value removes one): recorded at this position, and applied with this turn's commit, from
    /// when on the run shows, and is filtered, by them. Each value must be a string, number,
    /// boolean or null; the run's total is held to the server's `max_attributes` (over it, the
    /// run fails, naming the limit).
    pub fn upsert_search_attributes(
        &self,
        attributes: &serde_json::Map<String, Value>,
    ) -> Result<(), StepError> {
        let (seq, replay) = self.replay(CheckpointKind::SideEffect, ATTRIBUTES_MARKER);
        if !matches!(replay, Replay::New) {
            return Ok(());
        }
        for (key, value) in attributes {
            if value.is_object() || value.is_array() {
                return Err(StepError::fatal(format!(
                    "search attribute `{key}` must be a string, number, boolean or null"
                ))
                .with_code("invalid_attributes"));
            }
        }
        let at = self.clock.now();
        self.state().commands.push(Command::RecordStep {
            seq,
            name: ATTRIBUTES_MARKER.to_owned(),
            output: Some(Value::Object(attributes.clone())),
            error: None,
            started_at: at,
            finished_at: at,
        });
        Ok(())
    }

    /// The current time, captured once: replays return the first value.
    pub fn now(&self) -> Operation<Millis> {
        let name = format!("now#{}", self.state().next_seq);
        let clock = self.clock.clone();
        self.side_effect_named(&name, move || clock.now())
            .map(Result::unwrap_or_default)
    }

    /// Runs `f` once, right away, and records its result; replays return the recorded value.
    /// For non-deterministic values (random ids, the time) that the workflow branches on.
    pub fn side_effect<T, F>(&self, f: F) -> Operation<Result<T, StepError>>
    where
        T: Serialize + DeserializeOwned,
        F: FnOnce() -> T,
    {
        self.side_effect_named("sideEffect", f)
    }

    fn side_effect_named<T, F>(&self, name: &str, f: F) -> Operation<Result<T, StepError>>
    where
        T: Serialize + DeserializeOwned,
        F: FnOnce() -> T,
    {
        let (seq, replay) = self.replay(CheckpointKind::SideEffect, name);
        match replay {
            Replay::Resolved(cp) => Operation::ready(resolved(*cp, name)),
            Replay::Waiting if self.state().nondeterminism.is_some() => {
                Operation::suspended(&self.state)
            }
            Replay::Waiting | Replay::New => {
                let value = f();
                let output = match serde_json::to_value(&value) {
                    Ok(output) => output,
                    Err(e) => {
                        return Operation::ready(Err(StepError::fatal(format!(
                            "the side effect `{name}` cannot be serialised: {e}"
                        ))));
                    }
                };
                let at = self.clock.now();
                self.state().commands.push(Command::RecordStep {
                    seq,
                    name: name.to_owned(),
                    output: Some(output),
                    error: None,
                    started_at: at,
                    finished_at: at,
                });
                Operation::ready(Ok(value))
            }
        }
    }
}

fn resolved<O: DeserializeOwned>(cp: Checkpoint, name: &str) -> Result<O, StepError> {
    match cp.status {
        CheckpointStatus::Completed => decode(
            cp.output.unwrap_or(Value::Null),
            &format!("the recorded output of step `{name}`"),
        )
        .map_err(|m| StepError::fatal(m).with_code("output_mismatch")),
        _ => Err(StepError(cp.error.unwrap_or_else(|| {
            StepFailure::new(format!("step `{name}` failed"))
        }))),
    }
}

/// How [`WorkflowContext::gather_children`] treats a failing child.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gather {
    /// Wait for every child; fail with the first failure (in order).
    WaitAll,
    /// Fail at the first failure and cancel the children still running.
    FailFast,
}

enum SignalWait {
    Got(Value),
    TimedOut,
    Suspend,
}

impl TurnState {
    /// Makes the run wake by `at` at the latest.
    fn wake_by(&mut self, at: Millis) {
        self.next_wake = Some(self.next_wake.map_or(at, |w| w.min(at)));
    }

    /// Takes the oldest buffered signal named `name` for the wait at `seq`.
    fn take_signal(&mut self, seq: u32, name: &str) -> Option<Value> {
        let at = self.signals.iter().position(|s| s.name == name)?;
        let signal = self.signals.remove(at);
        self.commands.push(Command::ConsumeSignal {
            seq,
            signal: name.to_owned(),
            signal_id: signal.id,
        });
        Some(signal.payload)
    }
}

/// Counts a local step as running for as long as it lives, even if its future is dropped.
struct InFlight<'a>(&'a WorkflowContext);

impl<'a> InFlight<'a> {
    fn enter(ctx: &'a WorkflowContext) -> Self {
        ctx.state().local_in_flight += 1;
        InFlight(ctx)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.state().local_in_flight -= 1;
    }
}

/// The id of the child started at `seq` of `parent`: `<parent>.child.<seq>`, or, for a parent id
/// so long that would not fit, a digest of it. Deterministic either way, so a replayed parent
/// finds the child it already started.
pub fn child_run_id(parent: &RunId, seq: u32) -> RunId {
    use sha2::{Digest, Sha256};

    RunId::parse(&format!("{parent}.child.{seq}")).unwrap_or_else(|_| {
        let digest = Sha256::digest(format!("{parent}:{seq}").as_bytes());
        let short: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
        RunId::parse(&format!("run_{short}.child.{seq}")).unwrap_or_else(|_| parent.clone())
    })
}
