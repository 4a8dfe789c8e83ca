//! Lease renewal: while a turn executes here, its run's lease is extended, so a long local step
//! is not mistaken for a crash; and the driver's own heartbeat, so the remote steps it sent are
//! not mistaken for a gone driver's.

use std::sync::Arc;

use tokio::sync::watch;

use super::shared::Shared;

pub(crate) async fn renew_loop(shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    let every = shared.config.lease / 3;
    let lease_ms = shared.config.lease.as_millis() as i64;
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            _ = tokio::time::sleep(every) => {}
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
