//! Retention: once a minute, each tenant's run families that ended longer ago than its plan
//! keeps history are deleted (see [`crate::retention`]).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::driver::state::State;
use crate::retention::{expiries, prune};
use crate::store::StoreResult;

/// How often expired history is looked for.
const EVERY: Duration = Duration::from_secs(60);

pub(crate) async fn retention_loop(state: Arc<State>, mut stop: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            () = state.pace(EVERY) => {}
        }
        if let Err(e) = prune_once(&state, &stop).await {
            tracing::warn!(error = %e, "deleting expired history failed; retrying next round");
        }
    }
}

/// One round over every tenant in the engine's scope, until the engine stops.
async fn prune_once(state: &State, stop: &watch::Receiver<bool>) -> StoreResult<()> {
    for expiry in expiries(&*state.store, &state.scope, state.clock.now()).await? {
        let deleted = prune(&*state.store, &expiry, || !*stop.borrow()).await?;
        if deleted > 0 {
            tracing::info!(tenant = %expiry.tenant, days = expiry.days, deleted, "deleted expired history");
        }
    }
    Ok(())
}
