//! A turn's commit: the row a turn leaves its run in, and the writes that follow the run's move.
//!
//! One rule, two dialects: a store moves the run (its compare-and-set on the lease, in its own
//! statement, which PostgreSQL may fuse with the checkpoints and a result) and inserts the
//! turn's new checkpoints; [`finish`] then makes the rest of the commit, in this order:
//! redispatched steps, fired timers, consumed signals, timed-out signals and steps, children,
//! the successor, cancellations, the parent's wait, and the history the run's next turn replays.
//! Each store supplies the statements ([`TurnStatements`]) in its SQL.

use serde_json::Value;

use super::settle::{
    Resolution, Settle, schedule_retry, settle_ended, settle_parent, settles_parent,
};
use crate::model::{
    CheckpointKind, Millis, Run, RunId, RunStatus, Scope, StepFailure, StepOutcome, StepResult,
    step_id,
};
use crate::store::{
    Claim, Committed, History, NewCheckpoint, NewRun, Redispatch, StoreError, StoreResult,
    TurnCommit, TurnOutcome,
};

/// The lease a new run is inserted under, as `(owner, until)`: the driver's `claim` when its
/// scope admits the run's namespace (only a driver of that namespace may take the run); else
/// none, and the run is inserted `pending`.
pub(crate) fn start_lease(run: &NewRun, claim: Option<&Claim>) -> Option<(String, Millis)> {
    claim
        .filter(|c| c.scope.admits(&run.namespace))
        .map(|c| (c.owner.clone(), c.until))
}

/// What a start whose run id is taken fails with.
pub(crate) fn id_taken(id: &RunId) -> StoreError {
    StoreError::Conflict(format!("run `{id}`"))
}

/// What a turn's outcome writes on its run: the next status (before the stay-running rule), the
/// output or error, the timer to wake for, and the end time.
pub(crate) struct RunUpdate {
    pub status: RunStatus,
    pub output: Option<Value>,
    pub error: Option<StepFailure>,
    pub wake_at: Option<Millis>,
    pub finished_at: Option<Millis>,
}

/// The run row a turn ending in `outcome` at `now` leaves behind.
pub(crate) fn run_update(outcome: &TurnOutcome, now: Millis) -> RunUpdate {
    let update = |status, output, error, wake_at, finished_at| RunUpdate {
        status,
        output,
        error,
        wake_at,
        finished_at,
    };
    match outcome {
        TurnOutcome::Suspend { wake_at } => {
            update(RunStatus::Suspended, None, None, *wake_at, None)
        }
        TurnOutcome::Complete(out) => update(
            RunStatus::Completed,
            Some(out.clone()),
            None,
            None,
            Some(now),
        ),
        TurnOutcome::Fail(err) => {
            update(RunStatus::Failed, None, Some(err.clone()), None, Some(now))
        }
        TurnOutcome::Compensated(err) => update(
            RunStatus::Compensated,
            None,
            Some(err.clone()),
            None,
            Some(now),
        ),
        TurnOutcome::CompensationFailed(err) => update(
            RunStatus::CompensationFailed,
            None,
            Some(err.clone()),
            None,
            Some(now),
        ),
        TurnOutcome::Block { reason, recheck_at } => update(
            RunStatus::Blocked,
            None,
            Some(reason.clone()),
            *recheck_at,
            None,
        ),
        TurnOutcome::Continue(next) => update(
            RunStatus::Continued,
            Some(serde_json::json!({ "continuedAs": next.id })),
            None,
            None,
            Some(now),
        ),
    }
}

/// A new run's row after its first turn, `commit`, at `now`, and whether the run stays claimed:
/// [`run_update`] with the stay-running rule every store's turn update applies (a run that
/// would suspend but whose timer is already due, or one of whose steps timed out, stays
/// `running` under the lease, claimed once more). A new run was never woken otherwise.
#[cfg(feature = "postgres")]
pub(crate) fn first_turn_row(commit: &TurnCommit, now: Millis) -> (RunUpdate, bool) {
    let mut row = run_update(&commit.outcome, now);
    let woken = row.status == RunStatus::Suspended
        && (!commit.timed_out_steps.is_empty() || row.wake_at.is_some_and(|at| at <= now));
    if woken {
        row.status = RunStatus::Running;
        row.wake_at = None;
    }
    (row, woken)
}

/// Which run [`TurnStatements::cancel_child`] cancels.
#[derive(Clone, Copy)]
pub(crate) enum Which {
    /// The child itself.
    Child,
    /// The child's live ContinueAsNew successor (`<child>:c<n>`).
    Successor,
}

/// The statements of a turn's commit after the run moved, in a store's dialect, inside its
/// write transaction.
pub(crate) trait TurnStatements: Settle {
    /// Notes remote step `sent.seq` of run `id`, whose retry came due, as sent by `owner` at
    /// `now` on `sent.worker_group` for `sent.route`.
    async fn mark_redispatched(
        &mut self,
        id: &RunId,
        sent: &Redispatch,
        owner: &str,
        now: Millis,
    ) -> StoreResult<()>;

    /// Marks buffered signal `signal` of run `id` consumed by the wait at `seq`; its payload, or
    /// `None` when another wait took it meanwhile.
    async fn take_signal(
        &mut self,
        id: &RunId,
        signal: i64,
        seq: u32,
    ) -> StoreResult<Option<Self::Json>>;

    /// Inserts a `pending` run, or with `lease` (`owner`, `until`) a `running` one locked by
    /// `owner`; with `keep_existing`, an existing id is left alone (and `None` returned) instead
    /// of failing with [`crate::store::StoreError::Conflict`].
    async fn insert_run(
        &mut self,
        run: &NewRun,
        now: Millis,
        keep_existing: bool,
        lease: Option<(&str, Millis)>,
    ) -> StoreResult<Option<Run>>;

    /// Inserts checkpoint `cp` of run `id`, keeping any already at its position (no dispatcher
    /// is noted); whether it was new.
    async fn insert_checkpoint(&mut self, id: &RunId, cp: &NewCheckpoint) -> StoreResult<bool>;

    /// Replaces run `id`'s search attributes (and the rows filters use) with `attributes`.
    async fn set_attributes(
        &mut self,
        id: &RunId,
        attributes: &serde_json::Map<String, serde_json::Value>,
    ) -> StoreResult<()>;

    /// One run by id, whatever its namespace (for writes that already checked visibility).
    async fn run_by_id(&mut self, id: &RunId) -> StoreResult<Option<Run>>;

    /// Cancels the live run `which` picks for child `child` of run `parent`, recording `error`:
    /// waiting, it ends `cancelled`; running, it goes `cancelling`.
    async fn cancel_child(
        &mut self,
        parent: &RunId,
        child: &RunId,
        which: Which,
        error: Self::Json,
        now: Millis,
    ) -> StoreResult<Option<Run>>;

    /// Whether `child`, a child of `parent`, continued as new.
    async fn continued(&mut self, parent: &RunId, child: &RunId) -> StoreResult<bool>;

    /// What run `id`'s next turn replays (unscoped: the caller's write already checked the run).
    async fn history(&mut self, id: &RunId) -> StoreResult<History>;
}

/// The rest of a turn's commit once `run` was moved and its checkpoints written: redispatches
/// (noted as sent by `owner`), resolved waits, children, the successor, cancellations and the
/// parent's wait, and the history its next turn replays. `None` when the turn's view was stale
/// (a buffered signal it took was taken meanwhile): the caller backs the commit out.
pub(crate) async fn finish<S: TurnStatements>(
    s: &mut S,
    run: Run,
    id: &RunId,
    owner: &str,
    commit: &TurnCommit,
    now: Millis,
) -> StoreResult<Option<Committed>> {
    for sent in &commit.redispatched {
        s.mark_redispatched(id, sent, owner, now).await?;
    }
    for seq in &commit.fired_timers {
        let fired = Resolution::Completed(None);
        s.resolve_pending(id, i64::from(*seq), CheckpointKind::Sleep, fired, now)
            .await?;
    }
    for (signal, seq) in &commit.consumed_signals {
        let Some(payload) = s.take_signal(id, *signal, *seq).await? else {
            // Taken by another wait meanwhile: this turn's view was stale; discard it.
            return Ok(None);
        };
        let got = Resolution::Completed(Some(payload));
        s.resolve_pending(id, i64::from(*seq), CheckpointKind::Signal, got, now)
            .await?;
    }
    for seq in &commit.timed_out_signals {
        let timed_out = Resolution::Failed(S::json(&signal_timed_out()));
        let resolved = s
            .resolve_pending(id, i64::from(*seq), CheckpointKind::Signal, timed_out, now)
            .await?;
        if resolved == 0 {
            // An event reached the wait meanwhile: this turn took the timeout path on a stale
            // view; discard it, and the next turn takes the event.
            return Ok(None);
        }
    }
    for seq in &commit.timed_out_steps {
        time_out_step(s, id, *seq, now).await?;
    }
    for child in &commit.children {
        if s.insert_run(child, now, true, None).await?.is_none()
            && let Some(existing) = s.run_by_id(&child.id).await?
            && existing.status.is_terminal()
        {
            // A retried parent re-issued a child that already ended: settle the new wait now.
            settle_parent(s, id, &existing, now).await?;
        }
    }
    if let TurnOutcome::Continue(next) = &commit.outcome {
        s.insert_run(next, now, true, None).await?;
    }
    if let Some(hook) = &commit.dead_letter {
        s.insert_run(hook, now, true, None).await?;
    }
    let run = match &commit.search_attributes {
        Some(attributes) => {
            s.set_attributes(id, attributes).await?;
            s.run_by_id(id).await?.unwrap_or(run)
        }
        None => run,
    };
    let cancelled = cancel_children(s, id, &commit.cancel_runs, now).await?;
    settle_ended(s, &run, now).await?;
    // A suspended run's history after a commit that only appends is derived by the caller.
    let history = match run.status {
        RunStatus::Running => Some(s.history(id).await?),
        RunStatus::Suspended if !commit.only_appends() => Some(s.history(id).await?),
        _ => None,
    };
    Ok(Some(Committed {
        run,
        history,
        cancelled,
    }))
}

/// Checkpoints a local step a worker reported finished inside a turn: only when run `id` is in
/// `scope` and has not ended, and only at a position still free. Whether it was written.
pub(crate) async fn record_local_step<S: TurnStatements>(
    s: &mut S,
    scope: &Scope,
    id: &RunId,
    checkpoint: &NewCheckpoint,
) -> StoreResult<bool> {
    let open = s
        .run_by_id(id)
        .await?
        .is_some_and(|run| scope.admits(&run.namespace) && !run.status.is_terminal());
    Ok(open && s.insert_checkpoint(id, checkpoint).await?)
}

/// Cancels `children` of run `id` (a fail-fast gather): waiting ones end `cancelled` and settle
/// the parent's wait, running ones go `cancelling`. Only this run's own children, never
/// anything else. A child that continued as new is cancelled as its live successor: looked for
/// only once the child is seen `continued`, in a statement of its own, so a successor whose
/// insert committed while the first statement waited for the child's row is seen too. Returns
/// the runs it cancelled or set cancelling.
async fn cancel_children<S: TurnStatements>(
    s: &mut S,
    id: &RunId,
    children: &[RunId],
    now: Millis,
) -> StoreResult<Vec<RunId>> {
    let mut changed = Vec::new();
    for child in children {
        let error = || S::json(&sibling_failed(id));
        let mut cancelled = s
            .cancel_child(id, child, Which::Child, error(), now)
            .await?;
        if cancelled.is_none() && s.continued(id, child).await? {
            cancelled = s
                .cancel_child(id, child, Which::Successor, error(), now)
                .await?;
        }
        if let Some(child) = cancelled {
            if settles_parent(child.status) {
                settle_parent(s, id, &child, now).await?;
            }
            changed.push(child.id);
        }
    }
    Ok(changed)
}

/// Fails the current try of remote step `seq` with `timeout`: retried by its policy (pending
/// again after the backoff), or failed for good. A result that arrives for a try that timed out
/// is still accepted while the step waits for its retry.
async fn time_out_step<S: TurnStatements>(
    s: &mut S,
    id: &RunId,
    seq: u32,
    now: Millis,
) -> StoreResult<()> {
    let timeout = step_timed_out(seq);
    let result = StepResult {
        run_id: id.clone(),
        seq,
        step_id: step_id(id, seq),
        started_at: None,
        outcome: StepOutcome::Failed {
            error: timeout.clone(),
        },
        receipt: Default::default(),
    };
    if schedule_retry(s, &result, &timeout, now).await?.is_none() {
        let failed = Resolution::Failed(S::json(&timeout));
        s.resolve_pending(id, i64::from(seq), CheckpointKind::RemoteStep, failed, now)
            .await?;
    }
    Ok(())
}

/// The error of a child cancelled because a sibling failed under fail-fast.
fn sibling_failed(parent: &RunId) -> StepFailure {
    StepFailure::new(format!("cancelled: a sibling under run {parent} failed"))
        .with_code("cancelled")
}

/// The error of a signal wait whose timeout passed.
fn signal_timed_out() -> StepFailure {
    StepFailure::new("the signal wait timed out").with_code("timeout")
}

/// The error of a step try that outlived its timeout.
fn step_timed_out(seq: u32) -> StepFailure {
    StepFailure::new(format!(
        "step try timed out (no result within its timeout); seq {seq}"
    ))
    .with_code("timeout")
}
