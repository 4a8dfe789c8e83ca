//! The claim loop: takes runnable runs of the engine's scope with a lease, as many as turn slots
//! are free, picked fairly between tenants and within a tenant between its workflows, and hands
//! each to [`turn::runner`](crate::driver::turn::runner). Idle, it sleeps
//! until the next timer or lease expiry on the engine's clock, or for at most `idle_poll` of
//! wall time, unless a commit pokes it sooner (see [`State::wait_until`]).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::driver::plans::PlanSet;
use crate::driver::state::{State, millis};
use crate::driver::turn::runner::{FirstTurn, spawn_turns};
use crate::fair::FairQueue;
use crate::model::{Millis, Namespace, RunId};
use crate::store::Runnable;

/// How long a read of what waits serves the fair pick at least before it is read again. While
/// every slot is busy, slots free one or two at a time; reading on each would cost a ranking
/// query per claimed run.
const REREAD: Duration = Duration::from_millis(10);

/// A read serves at least this many times as long as it took. The ranked read of a deep backlog
/// costs tens of milliseconds, and the loop claims nothing while it reads: read every round,
/// the slots that free meanwhile wait for it, and a deep backlog drains many times slower than
/// a shallow one. So at most about a fifth of the loop's time goes to reading. A run put on
/// record for a tenant the read held every run of is news it does not wait for (see
/// [`crate::fair::Shares::note_arrival`]).
const TRUST_READ_FOR: u32 = 4;

/// The fewest of each tenant's runs one read holds: the pick between tenants follows their
/// shares only while each tenant has runs in hand, and a tenant's runs running out calls for
/// a read at once. Holding more would read a deep backlog less often still, but then a quiet
/// tenant's run now and then waited for a trusted read to run out (see bench/HISTORY.md,
/// session 28).
const PER_TENANT: u32 = 16;

/// Claims due runs and starts their turns until `stop`: as many as turn slots are free, picked
/// fairly between tenants (see [`crate::fair`]).
pub(crate) async fn claim_loop(state: Arc<State>, mut stop: watch::Receiver<bool>) {
    let lease_ms = state.config.lease.as_millis() as i64;
    let mut waiting = FairQueue::<Namespace, (String, Option<String>), RunId>::new();
    let mut read_at: Option<Instant> = None;
    let mut read_cost = Duration::ZERO;
    // Tenants the last read did not hold every waiting run of.
    let mut truncated = HashSet::new();
    // Picks in a row none of which could be claimed (PostgreSQL skips rows a commit holds).
    let mut missed = 0u32;
    loop {
        if *stop.borrow() {
            break;
        }
        let free = state.turns.free();
        if free == 0 {
            // Every slot is busy: wait for one to come free rather than polling.
            tokio::select! {
                () = state.turns.freed() => {}
                _ = stop.changed() => {}
            }
            continue;
        }
        let now = state.clock.now();
        let since_read = read_at.map(|at| at.elapsed());
        let stale = since_read.is_none_or(|since| {
            since >= REREAD.max(read_cost * TRUST_READ_FOR)
                || since >= REREAD
                    && state
                        .turns
                        .arrived_beyond(|tenant| truncated.contains(tenant))
        });
        if waiting.len() < free as usize || stale {
            let started = Instant::now();
            read_at = Some(started);
            // What is on record from here on is news to this read.
            state.turns.clear_arrivals();
            // For weights and to leave out what a ceiling holds: the claim itself counts
            // against the plans as stored.
            let plans = state.plans.current(&*state.store).await;
            let (runs, cut) = read_waiting(&state, &plans, now, free).await;
            read_cost = started.elapsed();
            truncated = cut;
            for tenant in runs.iter().map(|r| &r.namespace).collect::<HashSet<_>>() {
                waiting.set_weight(tenant.clone(), plans.weight(tenant));
            }
            waiting.refill(runs.into_iter().map(|r| {
                let key = (r.workflow, r.concurrency_key);
                (r.namespace, key, r.due, r.id)
            }));
        }
        // Turns taken directly are service too: charged, the picks weigh all a tenant got.
        for (tenant, times) in state.turns.take_direct_counts() {
            waiting.charge(&tenant, times);
        }
        // Who waits for a slot, so the direct ways leave the slots that free to them.
        note_waiting(&state, &waiting, &truncated);
        // In the fair queue's order. Each pick holds its slot from here, so a direct take cannot
        // slip in before the claim.
        let mut picked = Vec::new();
        let mut picked_of = Vec::new();
        let mut slots = HashMap::new();
        let mut lost_slot = false;
        while picked.len() < free as usize {
            let Some((tenant, _, id)) = waiting.pop() else {
                break;
            };
            let Some(slot) = state
                .turns
                .try_take_any(&tenant, state.plans.last_weight(&tenant))
            else {
                // Taken directly since the slots were counted: the run waits for the next.
                waiting.refund(&tenant);
                read_at = None;
                lost_slot = true;
                break;
            };
            slots.insert(id.clone(), slot);
            picked.push(id);
            picked_of.push(tenant.clone());
            if truncated.contains(&tenant) && !waiting.holds(&tenant) {
                // The read held only this tenant's first runs: what else it has, and its
                // place against the others, needs a new read before the next pick.
                read_at = None;
                break;
            }
        }
        if picked.is_empty() && lost_slot {
            // Not idle: runs wait, for the next slot that frees.
            continue;
        }
        let claimed = if picked.is_empty() {
            Vec::new()
        } else {
            match state
                .store
                .claim_these(
                    &state.scope,
                    &picked,
                    &state.config.owner,
                    now,
                    lease_ms,
                    state.config.max_recoveries,
                )
                .await
            {
                Ok(runs) => runs,
                Err(e) => {
                    tracing::warn!(error = %e, "claiming runs failed; retrying shortly");
                    Vec::new()
                }
            }
        };
        if claimed.len() < picked.len() {
            // Some were taken by another driver or a direct claim, or held by a ceiling: what
            // waits has moved on, and their tenants were not served.
            read_at = None;
            let won: HashSet<&RunId> = claimed.iter().map(|run| &run.id).collect();
            for (id, tenant) in picked.iter().zip(&picked_of) {
                if !won.contains(id) {
                    waiting.refund(tenant);
                }
            }
        }
        if claimed.is_empty() && !picked.is_empty() {
            missed += 1;
            if missed >= 3 {
                // What was read is held or gone: give the holders a moment, not a spin.
                state.pace(Duration::from_millis(2)).await;
            }
            continue;
        }
        missed = 0;
        if claimed.is_empty() {
            // Any suspend committed from here on pokes us, until we know what we wait for.
            state.plan_wake(Millis::MAX);
            let at = idle_until(&state, now).await;
            let poll_at = Instant::now() + state.config.idle_poll;
            state.plan_wake(at);
            tokio::select! {
                _ = state.wake.notified() => {}
                () = state.wait_until(at, poll_at) => {}
                _ = stop.changed() => {}
            }
            // Awake: whatever was committed meanwhile is seen by the next claim.
            state.plan_wake(Millis::MIN);
            read_at = None;
            continue;
        }
        for run in claimed {
            if let Some(slot) = slots.remove(&run.id) {
                spawn_turns(state.clone(), run, FirstTurn::Claimed(None), slot);
            }
        }
    }
}

/// Tells the turn slots which tenants have runs waiting for one: those the fair queue holds, and
/// those the last read held only the first runs of.
fn note_waiting(
    state: &State,
    waiting: &FairQueue<Namespace, (String, Option<String>), RunId>,
    truncated: &HashSet<Namespace>,
) {
    state.turns.set_waiting(
        waiting
            .tenants()
            .chain(truncated)
            .map(|t| (t.clone(), state.plans.last_weight(t))),
    );
}

/// What waits for a turn, for the fair pick: enough of each tenant to fill `free` slots (and
/// a few rounds' worth while slots free one at a time), and the tenants it holds only the first
/// runs of. Fresh runs of a tenant at its concurrency ceiling are left out: picking them would
/// only have the claim refuse them, round after round.
async fn read_waiting(
    state: &State,
    plans: &PlanSet,
    now: Millis,
    free: u32,
) -> (Vec<Runnable>, HashSet<Namespace>) {
    let per_tenant = free.max(PER_TENANT);
    let limit = per_tenant.saturating_mul(4).clamp(64, 4096);
    let mut runs = match state
        .store
        .runnable_runs(
            &state.scope,
            now,
            per_tenant,
            limit,
            state.config.max_recoveries,
        )
        .await
    {
        Ok(runs) => runs,
        Err(e) => {
            tracing::warn!(error = %e, "reading runs that need a turn failed; retrying shortly");
            return (Vec::new(), HashSet::new());
        }
    };
    let mut counts = HashMap::<&Namespace, u32>::new();
    for run in &runs {
        *counts.entry(&run.namespace).or_default() += 1;
    }
    let truncated: HashSet<Namespace> = counts
        .into_iter()
        .filter(|(_, n)| *n >= per_tenant)
        .map(|(tenant, _)| tenant.clone())
        .collect();
    let limited: HashMap<Namespace, u32> = runs
        .iter()
        .filter(|r| r.fresh)
        .filter_map(|r| {
            Some((
                r.namespace.clone(),
                plans.max_concurrent_runs(&r.namespace)?,
            ))
        })
        .collect();
    for (tenant, ceiling) in limited {
        let room = match state.store.started(&tenant).await {
            Ok(started) => u64::from(ceiling).saturating_sub(started),
            // The claim counts again anyway; only the pick is less informed.
            Err(_) => u64::from(ceiling),
        };
        let mut left = room;
        runs.retain(|r| {
            if !r.fresh || r.namespace != tenant {
                return true;
            }
            let keep = left > 0;
            left = left.saturating_sub(1);
            keep
        });
    }
    (runs, truncated)
}

/// Until when (engine time) to sleep with nothing to do: the next timer or lease expiry, at
/// most `idle_poll` from now. The caller also stops after `idle_poll` of wall time: runs
/// started by another process do not poke our `wake` and are found only by looking again,
/// which a test clock standing still must not stop (see [`State::wait_until`]). Capping
/// the engine-time wait too keeps [`State::plan_wake`] honest: a commit due before `at` pokes
/// the loop, and one due after is passed by any clock that passes `at`.
///
/// A wake-up that was due when the claim at `claimed_at` did not take it (a lease is taken
/// over only once it is *past*) is looked at again a millisecond after that claim, not at once:
/// a test clock standing on it would otherwise spin the loop.
async fn idle_until(state: &State, claimed_at: Millis) -> Millis {
    let next = state.store.next_wake_at(&state.scope).await;
    let now = state.clock.now();
    let cap = now.saturating_add(millis(state.config.idle_poll));
    match next {
        Ok(Some(at)) => cap.min(at.max(claimed_at + 1)),
        Ok(None) => cap,
        Err(e) => {
            tracing::warn!(error = %e, "reading the next wake-up failed");
            cap
        }
    }
}
