//! Every control plane, every [`EVERY`], puts back what gone consumers held: the jobs our
//! processes took and did not settle ([`super::holds`]), and the active jobs of SDK workers
//! whose liveness lapsed ([`super::stalls`]). Each put-back is one script, so control planes
//! that look at the same time do not put a job back twice.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use super::Shared;
use super::holds::reclaim_gone;
use super::stalls::Stalls;

/// How often a control plane looks.
const EVERY: Duration = Duration::from_secs(2);

/// Looks every [`EVERY`] until `alive`, the channel the control plane's results consumer fills,
/// closes.
pub(super) fn keep<T: Send + 'static>(shared: Arc<Shared>, alive: mpsc::Sender<T>) {
    tokio::spawn(async move {
        let stalls = Stalls::default();
        loop {
            tokio::select! {
                () = alive.closed() => return,
                () = tokio::time::sleep(EVERY) => {}
            }
            if let Err(e) = reclaim_gone(&shared).await {
                tracing::debug!(error = %e, "putting back what stopped processes took failed; trying again");
            }
            if let Err(e) = stalls.recover(&shared).await {
                tracing::debug!(error = %e, "putting back the jobs of workers that stopped beating failed; trying again");
            }
        }
    });
}
