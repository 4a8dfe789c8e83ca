//! A step's rate and concurrency limits, applied to a turn's tasks before they are sent (SPEC §8,
//! flow control), on counters the transport keeps for every control plane:
//!
//! - A dispatch of a rate-limited step takes one from its tenant's allowance for the step (and
//!   key); over it, the run looks again when the allowance has one.
//! - A dispatch of a step with a concurrency limit takes one of its tenant's slots for the step
//!   (and key), held until its result is recorded ([`release`]) under a lease the sweep renews
//!   while it is out ([`renew_slots`]). Without room, the run waits in the counter's line and
//!   the release that frees a slot wakes the earliest; it also looks again by itself, less often
//!   the longer it waits, in case a wake-up was lost with a control plane.
//!
//! A task held back is treated like one the dispatch guard holds: its run parks `blocked` with
//! the reason, and the step is sent again from the next turn. Nothing is failed.

use std::time::Duration;

use serde_json::json;

use super::backoff::backing_off;
use crate::driver::state::State;
use crate::model::{
    CheckpointStatus, Concurrency, Millis, Namespace, RateLimit, RemoteTask, Run, RunId, RunStatus,
    StepFailure, step_id,
};
use crate::store::{RunPatch, TurnOutcome};
use crate::transport::SlotClaim;

/// The reason code of a run parked by a step's rate limit.
pub(crate) const RATE_LIMITED: &str = "rate_limited";

/// The reason code of a run parked by a step's concurrency limit.
pub(crate) const CONCURRENCY_LIMITED: &str = "concurrency_limited";

/// How long a run whose step cannot name its rate key waits before it is looked at again: only
/// new code (then "continue") or a changed input can give it one.
const NO_KEY_RECHECK_MS: Millis = 60_000;

/// How long a slot is held without being renewed: six sweeps (see [`renew_slots`]), so a
/// control plane that died gives its dispatches' slots back within half a minute.
pub(crate) const SLOT_LEASE: Duration = Duration::from_secs(30);

/// Why a task was held back, and when to look again.
pub(crate) struct Hold {
    reason: StepFailure,
    recheck_at: Millis,
}

impl Hold {
    /// How the run parks for this hold, or for `timer` if that is due sooner.
    pub(crate) fn park(self, timer: Option<Millis>) -> TurnOutcome {
        TurnOutcome::Block {
            reason: self.reason,
            recheck_at: Some(timer.map_or(self.recheck_at, |at| at.min(self.recheck_at))),
        }
    }

    /// When to look again.
    pub(crate) fn recheck_at(&self) -> Millis {
        self.recheck_at
    }
}

/// A hold for a step whose input lacks the key its limit is counted by.
fn no_key(message: String, code: &str, now: Millis) -> Hold {
    Hold {
        reason: StepFailure::new(message).with_code(code),
        recheck_at: now.saturating_add(NO_KEY_RECHECK_MS),
    }
}

/// " for key `k`", or nothing for a limit without a key.
fn for_key(key: &str) -> String {
    if key.is_empty() {
        String::new()
    } else {
        format!(" for key `{key}`")
    }
}

/// The tenant whose counters a task spends: the one its routing token names.
fn tenant_of(task: &RemoteTask) -> Namespace {
    crate::transport::naming::token_tenant(&task.group)
}

/// Takes one dispatch of `task` from its step's allowance under `limit` at `now`, or says why
/// it must wait. A transport that cannot count lets it through, with a warning: a rate limit
/// protects a downstream service and must not stop the engine.
pub(crate) async fn take(
    state: &State,
    task: &RemoteTask,
    limit: &RateLimit,
    now: Millis,
) -> Result<(), Hold> {
    let input = task.input.clone().unwrap_or_default();
    let key = limit
        .key(&task.name, &input)
        .map_err(|message| no_key(message, RATE_LIMITED, now))?;
    let tenant = tenant_of(task);
    match state
        .transport
        .take(
            &tenant,
            &RateLimit::allowance(&task.name, &key),
            limit.per_minute,
            now,
        )
        .await
    {
        Ok(None) => Ok(()),
        Ok(Some(wait)) => {
            let per = for_key(&key);
            let message = format!(
                "step `{}` is rate limited to {} a minute{per}; it is sent when the allowance has one again",
                task.name, limit.per_minute
            );
            Err(Hold {
                reason: StepFailure {
                    details: Some(json!({
                        "step": task.name,
                        "key": key,
                        "perMinute": limit.per_minute,
                        "retryAt": now.saturating_add(wait),
                    })),
                    ..StepFailure::new(message).with_code(RATE_LIMITED)
                },
                recheck_at: now.saturating_add(wait),
            })
        }
        Err(e) => {
            tracing::warn!(error = %e, step = task.name, "a step's rate allowance could not be taken; sending it anyway");
            Ok(())
        }
    }
}

/// A concurrency slot a dispatch took: what [`give_back`] returns.
pub(crate) struct Slot {
    tenant: Namespace,
    /// The counter (see [`Concurrency::step_slots`]), kept on the step's checkpoint.
    pub counter: String,
    run: RunId,
    seq: u32,
}

/// Takes one of the slots of `task`'s step under `limit`, or says why it must wait: parked, in
/// line for the next free slot, and looking again by itself as a run the guard parked does
/// (see [`backing_off`]; `before` is the run's reason until now). A transport that
/// cannot count lets it through, with a warning, as for a rate.
pub(crate) async fn acquire(
    state: &State,
    task: &RemoteTask,
    limit: &Concurrency,
    before: Option<&StepFailure>,
    now: Millis,
) -> Result<Option<Slot>, Hold> {
    let input = task.input.clone().unwrap_or_default();
    let key = limit
        .step_key(&task.name, &input)
        .map_err(|message| no_key(message, CONCURRENCY_LIMITED, now))?;
    let tenant = tenant_of(task);
    let counter = Concurrency::step_slots(&task.name, &key);
    let holder = step_id(&task.run_id, task.seq);
    let claim = SlotClaim {
        holder: &holder,
        waiter: &task.run_id,
        limit: limit.limit.max(1),
        until: now.saturating_add(SLOT_LEASE.as_millis() as Millis),
    };
    match state.transport.acquire(&tenant, &counter, claim, now).await {
        Ok(true) => Ok(Some(Slot {
            tenant,
            counter,
            run: task.run_id.clone(),
            seq: task.seq,
        })),
        Ok(false) => {
            let message = format!(
                "step `{}` may have {} dispatch{} out at once{}; it is sent when one of them has its result",
                task.name,
                limit.limit,
                if limit.limit == 1 { "" } else { "es" },
                for_key(&key),
            );
            let reason = StepFailure {
                details: Some(json!({ "step": task.name, "key": key, "limit": limit.limit })),
                ..StepFailure::new(message).with_code(CONCURRENCY_LIMITED)
            };
            let (reason, recheck_at) = backing_off(reason, before, now);
            Err(Hold { reason, recheck_at })
        }
        Err(e) => {
            tracing::warn!(error = %e, step = task.name, "a step's concurrency slot could not be taken; sending it anyway");
            Ok(None)
        }
    }
}

/// The most waiters one freed slot tries to wake before the rest are left to look again by
/// themselves: each try is a write, and a line of waiters that all went on is rare.
const WAKES_TRIED: usize = 8;

/// Gives back `slot`, taken for a dispatch that is not sent after all.
pub(crate) async fn give_back(state: &State, slot: Slot) {
    release(state, &slot.tenant, &slot.counter, &slot.run, slot.seq).await;
}

/// Gives back the slot of `counter` that step `seq` of `run` held (its result is recorded), and
/// wakes the run that waited longest for one: it takes the slot on its next turn. A waiter that
/// no longer waits (it was cancelled, or looked again by itself and went on) is passed over for
/// the next, up to [`WAKES_TRIED`] of them; past that, the others look again by themselves.
pub(crate) async fn release(
    state: &State,
    tenant: &Namespace,
    counter: &str,
    run: &RunId,
    seq: u32,
) {
    let holder = step_id(run, seq);
    for _ in 0..WAKES_TRIED {
        // Giving back twice is a no-op, so each call after the first only takes a waiter.
        let next = match state.transport.release(tenant, counter, &holder).await {
            Ok(Some(next)) => next,
            Ok(None) => return,
            Err(e) => {
                // Its lease ends it within `SLOT_LEASE`; the waiters look again by themselves.
                tracing::warn!(error = %e, counter, "a concurrency slot could not be given back; its lease will end it");
                return;
            }
        };
        let back = RunPatch {
            status: RunStatus::Pending,
            error: None,
        };
        let now = state.clock.now();
        match state
            .store
            .update_run_if(&state.scope, &next, &[RunStatus::Blocked], back, now)
            .await
        {
            Ok(Some(woken)) => {
                tracing::debug!(run_id = %next, counter, "a concurrency slot freed: the run waiting longest looks again");
                state.queued(&woken.namespace);
                return;
            }
            Ok(None) => {}
            Err(e) => {
                tracing::debug!(run_id = %next, error = %e, "could not wake a run waiting for a slot; it looks again by itself");
                return;
            }
        }
    }
}

/// Gives back the slots held by the steps of `run` still out: it was cancelled, so they will
/// bring no result that would. A slot this misses (a read that failed) ends with its lease.
pub(crate) async fn release_run(state: &State, run: &Run) {
    let checkpoints = match state.store.checkpoints(&state.scope, &run.id).await {
        Ok(checkpoints) => checkpoints,
        Err(e) => {
            tracing::debug!(run_id = %run.id, error = %e, "could not read a cancelled run's steps; their slots end with their leases");
            return;
        }
    };
    let out = checkpoints.into_iter().filter(|cp| {
        matches!(
            cp.status,
            CheckpointStatus::Pending | CheckpointStatus::Running
        ) && cp.enqueued_at.is_some()
    });
    for cp in out {
        if let Some(counter) = &cp.slot {
            release(state, &run.namespace, counter, &run.id, cp.seq).await;
        }
    }
}

/// Renews the leases of the slots held by dispatches still out (the store says which), so that
/// only the slots of dispatches whose result was lost with a control plane, or whose run ended,
/// run out. Run by the sweep, every few seconds, on every control plane.
pub(crate) async fn renew_slots(
    state: &State,
    now: Millis,
) -> Result<(), crate::store::StoreError> {
    let held = state
        .store
        .slots_out(&state.scope, SLOTS_RENEWED_AT_MOST)
        .await?;
    let until = now.saturating_add(SLOT_LEASE.as_millis() as Millis);
    for out in held {
        let holder = step_id(&out.run_id, out.seq);
        if let Err(e) = state
            .transport
            .renew(&out.namespace, &out.slot, &holder, until, now)
            .await
        {
            tracing::warn!(error = %e, "could not renew concurrency slots; retrying next sweep");
            break;
        }
    }
    Ok(())
}

/// The most slots one sweep renews: the sum of every limit in use, which a deployment keeps far
/// below this.
const SLOTS_RENEWED_AT_MOST: u32 = 10_000;
