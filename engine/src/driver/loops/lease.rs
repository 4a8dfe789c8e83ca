//! Lease renewal: while a turn executes here, its run's lease is extended, so a long local step
//! is not mistaken for a crash; and the driver's own heartbeat, so the remote steps it sent are
//! not mistaken for a gone driver's, and so this engine learns soon when a peer joins or leaves.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::MissedTickBehavior;

use crate::driver::state::State;

/// How often the driver beats, at most. The beat also counts the other live drivers; a control
/// plane that believes it is alone sends steps before their commits (see [`crate::driver::fast_path::in_flight`]),
/// so a peer that joins must be noticed within about this long, not within a third of a lease.
const BEAT_EVERY: Duration = Duration::from_secs(1);

pub(crate) async fn lease_loop(state: Arc<State>, mut stop: watch::Receiver<bool>) {
    let renew_every = state.config.lease / 3;
    let lease_ms = state.config.lease.as_millis() as i64;
    let ticks = |every: Duration| {
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
        ticks
    };
    let mut beat = ticks(renew_every.min(BEAT_EVERY));
    let mut renew = ticks(renew_every);
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            _ = beat.tick() => {
                let now = state.clock.now();
                match state
                    .store
                    .beat_driver(&state.config.owner, now + lease_ms, now)
                    .await
                {
                    Ok(peers) => state.note_peers(Some(peers)),
                    Err(e) => {
                        tracing::warn!(error = %e, "the driver heartbeat failed");
                        state.note_peers(None);
                    }
                }
            }
            _ = renew.tick() => {
                let ids = state.in_flight.ids();
                if ids.is_empty() {
                    continue;
                }
                let until = state.clock.now() + lease_ms;
                if let Err(e) = state
                    .store
                    .renew_leases(&state.config.owner, &ids, until)
                    .await
                {
                    tracing::warn!(error = %e, runs = ids.len(), "renewing leases failed");
                }
            }
        }
    }
}
