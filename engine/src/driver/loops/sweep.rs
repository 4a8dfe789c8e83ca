//! The sweep: ends runs whose drivers abandoned them (a run taken over `max_recoveries` times
//! goes `dead`; a `cancelling` run whose driver died goes `cancelled`), wakes runs the dispatch
//! guard parked once their recheck time passes, and un-parks runs of a remote workflow once a
//! worker announcing it is live again.

use std::sync::Arc;

use tokio::sync::watch;

use crate::driver::state::State;
use crate::model::{Scope, TenantEventKind};
use crate::store::StoreError;

pub(crate) async fn sweep_loop(state: Arc<State>, mut stop: watch::Receiver<bool>) {
    let every = state.config.lease.min(std::time::Duration::from_secs(5));
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            _ = tokio::time::sleep(every) => {}
        }
        if let Err(e) = sweep_once(&state).await {
            tracing::warn!(error = %e, "sweeping abandoned runs failed; retrying next round");
        }
    }
}

/// One sweep; also run at start-up, before any claim.
pub(crate) async fn sweep_once(state: &State) -> Result<(), StoreError> {
    let now = state.clock.now();
    let ended = state
        .store
        .sweep_abandoned(&state.scope, state.config.max_recoveries, now)
        .await?;
    for run in &ended {
        tracing::warn!(run_id = %run.id, status = %run.status, "ended a run its drivers abandoned");
        state.emit(run, TenantEventKind::RunFailed, None);
    }
    if !ended.is_empty() {
        // Parents may have been settled.
        state.wake.notify_one();
    }
    let rechecked = state.store.wake_blocked(&state.scope, now).await?;
    for run in &rechecked {
        tracing::debug!(run_id = %run.id, "a parked run looks again for a worker that can take its step");
    }
    if !rechecked.is_empty() {
        state.wake.notify_one();
    }
    unpark_remote(state, now).await
}

/// Runs parked because no worker served their workflow (one this process does not have) go
/// back to `pending` once a live worker on their partition announces it at their version.
async fn unpark_remote(state: &State, now: crate::model::Millis) -> Result<(), StoreError> {
    let Ok(groups) = state.transport.worker_groups(&state.scope).await else {
        return Ok(());
    };
    for group in groups {
        let Some(partition) = group.partition.clone() else {
            continue;
        };
        if state.registry.latest(&group.name).is_some() || !state.scope.admits(&partition) {
            continue;
        }
        let served: Vec<(String, u32)> =
            crate::driver::turn::remote::announced_versions(state, &group.name, &partition)
                .await
                .into_iter()
                .map(|version| (group.name.clone(), version))
                .collect();
        let unparked = state
            .store
            .unblock_runs(&Scope::Only(partition), &served, now)
            .await?;
        for run in &unparked {
            tracing::info!(run_id = %run.id, workflow = %run.workflow, "a worker serves this run's workflow again");
            state.emit(run, TenantEventKind::RunStarted, None);
        }
        if !unparked.is_empty() {
            state.wake.notify_one();
        }
    }
    Ok(())
}
