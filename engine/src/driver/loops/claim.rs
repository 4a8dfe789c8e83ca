//! The claim loop: takes runnable runs of the engine's scope with a lease, as many as turn slots
//! are free, and hands each to [`turn::runner`](crate::driver::turn::runner). Idle, it sleeps
//! until the next timer or lease expiry (at most `idle_poll`) unless a commit pokes it sooner.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::driver::state::State;
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
            let wait = idle_wait(&state).await;
            state.plan_wake(state.clock.now() + wait.as_millis() as i64);
            tokio::select! {
                _ = state.wake.notified() => {}
                _ = tokio::time::sleep(wait) => {}
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

/// How long to sleep with nothing to do: until the next timer or lease expiry, at most
/// `idle_poll` (runs started by another process do not poke our `wake`).
async fn idle_wait(state: &State) -> Duration {
    let cap = state.config.idle_poll;
    match state.store.next_wake_at(&state.scope).await {
        Ok(Some(at)) => {
            let ms = (at - state.clock.now()).max(0) as u64;
            cap.min(Duration::from_millis(ms))
        }
        Ok(None) => cap,
        Err(e) => {
            tracing::warn!(error = %e, "reading the next wake-up failed");
            cap
        }
    }
}
