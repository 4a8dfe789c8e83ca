//! The activity minutes: every few seconds the step run times this engine recorded are added
//! to the store's minutes, and once in a while minutes older than the charts show are deleted.
//! (Runs started and finished are counted by the store itself, with every change.)

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::MissedTickBehavior;

use crate::driver::state::State;
use crate::model::ACTIVITY_KEPT_MINUTES;

/// How often recorded step run times are added: how far behind a chart's latest minute can be.
const EVERY: Duration = Duration::from_secs(5);

/// How many rounds pass between deletions of old minutes (ten minutes).
const PRUNE_EVERY_ROUNDS: u32 = 120;

pub(crate) async fn activity_loop(state: Arc<State>, mut stop: watch::Receiver<bool>) {
    let mut ticks = tokio::time::interval(EVERY);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut round: u32 = 0;
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            _ = ticks.tick() => {}
        }
        if let Err(e) = state.add_step_tallies().await {
            tracing::warn!(error = %e, "adding step run times to the activity minutes failed; retrying next round");
        }
        if round.is_multiple_of(PRUNE_EVERY_ROUNDS) {
            let before = state.clock.now().div_euclid(60_000) - ACTIVITY_KEPT_MINUTES;
            if let Err(e) = state.store.prune_activity(before).await {
                tracing::warn!(error = %e, "deleting old activity minutes failed; retrying later");
            }
        }
        round = round.wrapping_add(1);
    }
}
