//! Tells shared pools' workers whom they serve: every few seconds, each shared pool's grants,
//! each tenant at its plan's weight (a plan changed from the command line, or on another
//! control plane, reaches the workers this way). A grant or a revocation through this engine
//! publishes at once ([`publish`]).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::MissedTickBehavior;

use crate::driver::state::State;
use crate::model::SharedPool;
use crate::transport::TransportResult;

/// How often the grants are published again.
const EVERY: Duration = Duration::from_secs(10);

pub(crate) async fn shared_pools_loop(state: Arc<State>, mut stop: watch::Receiver<bool>) {
    // Only a shared broker has workers elsewhere to tell.
    if !state.transport.reaches_peers() {
        return;
    }
    let mut ticks = tokio::time::interval(EVERY);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            _ = ticks.tick() => {}
        }
        let pools = match state.store.shared_pools().await {
            Ok(pools) => pools,
            Err(e) => {
                tracing::warn!(error = %e, "reading the shared pools failed; retrying next round");
                continue;
            }
        };
        for pool in &pools {
            if let Err(e) = publish(&state, pool).await {
                tracing::warn!(error = %e, pool = %pool.name, "publishing a shared pool's grants failed; retrying next round");
            }
        }
    }
}

/// Publishes `pool`'s grants, each tenant at its plan's weight.
pub(crate) async fn publish(state: &State, pool: &SharedPool) -> TransportResult<()> {
    let plans = state.plans.current(&*state.store).await;
    let grants: Vec<_> = pool
        .grants
        .iter()
        .map(|tenant| (tenant.clone(), plans.of(tenant).weight.unwrap_or(1).max(1)))
        .collect();
    state.transport.publish_grants(&pool.name, &grants).await
}
