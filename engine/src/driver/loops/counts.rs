//! Folding the run counts: where the store appends a delta for every change of a run's status
//! (PostgreSQL, so control planes never wait on one another for a shared total), this folds
//! the deltas into the totals every second, so a read of the counts sums a few rows, never
//! thousands.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::MissedTickBehavior;

use crate::driver::state::State;

/// How often the deltas are folded: what a read of the counts sums is about this much of the
/// store's writes.
const EVERY: Duration = Duration::from_secs(1);

pub(crate) async fn counts_loop(state: Arc<State>, mut stop: watch::Receiver<bool>) {
    let mut ticks = tokio::time::interval(EVERY);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            _ = ticks.tick() => {}
        }
        if let Err(e) = state.store.fold_counts().await {
            tracing::warn!(error = %e, "folding the run counts failed; retrying next round");
        }
    }
}
