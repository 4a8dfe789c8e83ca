//! The claim loop: takes runnable runs of the engine's scope with a lease, as many as turn slots
//! are free, and hands each to [`turn::runner`](crate::driver::turn::runner). Idle, it sleeps
//! until the next timer or lease expiry on the engine's clock, or for at most `idle_poll` of
//! wall time, unless a commit pokes it sooner (see [`State::wait_until`]).

use std::sync::Arc;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::driver::state::{State, millis};
use crate::driver::turn::runner::{FirstTurn, spawn_turns};
use crate::model::Millis;

/// Claims due runs and starts their turns until `stop`.
pub(crate) async fn claim_loop(state: Arc<State>, mut stop: watch::Receiver<bool>) {
    let lease_ms = state.config.lease.as_millis() as i64;
    loop {
        if *stop.borrow() {
            break;
        }
        let free = state.turns.available_permits() as u32;
        if free == 0 {
            // Every slot is busy: wait for one to come free rather than polling.
            tokio::select! {
                slot = state.turns.clone().acquire_owned() => drop(slot),
                _ = stop.changed() => {}
            }
            continue;
        }
        let now = state.clock.now();
        let claimed = match state
            .store
            .claim_runs(
                &state.scope,
                &state.config.owner,
                now,
                lease_ms,
                free,
                state.config.max_recoveries,
            )
            .await
        {
            Ok(runs) => runs,
            Err(e) => {
                tracing::warn!(error = %e, "claiming runs failed; retrying shortly");
                Vec::new()
            }
        };
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
            continue;
        }
        for run in claimed {
            let Ok(slot) = state.turns.clone().acquire_owned().await else {
                break;
            };
            spawn_turns(state.clone(), run, FirstTurn::Claimed(None), slot);
        }
    }
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
