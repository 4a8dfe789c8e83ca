//! Lease renewal: while a turn executes here, its run's lease is extended, so a long local step
//! is not mistaken for a crash; and the driver's own heartbeat, so the remote steps it sent are
//! not mistaken for a gone driver's, and so this engine learns soon when a peer joins or leaves.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::driver::state::{State, millis};
use crate::model::Millis;

/// How often the driver beats, at most. The beat also counts the other live drivers; a control
/// plane that believes it is alone sends steps before their commits (see [`crate::driver::fast_path::in_flight`]),
/// so a peer that joins must be noticed within about this long, not within a third of a lease.
const BEAT_EVERY: Duration = Duration::from_secs(1);

pub(crate) async fn lease_loop(state: Arc<State>, mut stop: watch::Receiver<bool>) {
    let renew_every = state.config.lease / 3;
    let lease_ms = millis(state.config.lease);
    let mut beat = Round::new(&state, renew_every.min(BEAT_EVERY));
    let mut renew = Round::new(&state, renew_every);
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            () = beat.due(&state) => {
                beat.next(&state);
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
            () = renew.due(&state) => {
                renew.next(&state);
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

/// A round due every `every` of engine time (a lease and a heartbeat last that long on the
/// engine's clock, which a test may advance) or of wall time (the beat also counts the peers
/// that joined or left meanwhile), whichever passes first; see [`State::wait_until`]. Like a
/// tokio interval that delays missed ticks: a late round is followed by the next `every` later.
struct Round {
    every: Duration,
    /// When it is next due on the engine's clock.
    at: Millis,
    /// When it is next due on the wall clock.
    poll_at: Instant,
}

impl Round {
    fn new(state: &State, every: Duration) -> Self {
        Round {
            every,
            at: state.clock.now().saturating_add(millis(every)),
            poll_at: Instant::now() + every,
        }
    }

    async fn due(&self, state: &State) {
        state.wait_until(self.at, self.poll_at).await;
    }

    /// Schedules the next round, once this one is due.
    fn next(&mut self, state: &State) {
        let (now, wall) = (state.clock.now(), Instant::now());
        let every = millis(self.every);
        self.at = match self.at.saturating_add(every) {
            on_time if on_time > now => on_time,
            _ => now.saturating_add(every),
        };
        self.poll_at = match self.poll_at + self.every {
            on_time if on_time > wall => on_time,
            _ => wall + self.every,
        };
    }
}
