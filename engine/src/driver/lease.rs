//! Lease renewal: while a turn executes here, its run's lease is extended, so a long local step
//! is not mistaken for a crash; and the driver's own heartbeat, so the remote steps it sent are
//! not mistaken for a gone driver's, and so this engine learns soon when a peer joins or leaves.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::shared::Shared;

/// How often the driver beats, at most. The beat also counts the other live drivers; a control
/// plane that believes it is alone sends steps before their commits (see [`super::turning`]),
/// so a peer that joins must be noticed within about this long, not within a third of a lease.
const BEAT_EVERY: Duration = Duration::from_secs(1);

pub(crate) async fn renew_loop(shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    let renew_every = shared.config.lease / 3;
    let beat_every = renew_every.min(BEAT_EVERY);
    let lease_ms = shared.config.lease.as_millis() as i64;
    let mut renewed = tokio::time::Instant::now();
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            _ = tokio::time::sleep(beat_every) => {}
        }
        let until = shared.clock.now() + lease_ms;
        let now = shared.clock.now();
        match shared
            .store
            .beat_driver(&shared.config.owner, until, now)
            .await
        {
            Ok(peers) => shared.note_peers(Some(peers)),
            Err(e) => {
                tracing::warn!(error = %e, "the driver heartbeat failed");
                shared.note_peers(None);
            }
        }
        if renewed.elapsed() + beat_every / 2 < renew_every {
            continue;
        }
        renewed = tokio::time::Instant::now();
        let ids = shared.turning.ids();
        if ids.is_empty() {
            continue;
        }
        if let Err(e) = shared
            .store
            .renew_leases(&shared.config.owner, &ids, until)
            .await
        {
            tracing::warn!(error = %e, runs = ids.len(), "renewing leases failed");
        }
    }
}
