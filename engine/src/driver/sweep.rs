//! The sweep: ends runs whose drivers abandoned them (a run taken over `max_recoveries` times
//! goes `dead`; a `cancelling` run whose driver died goes `cancelled`), wakes runs the dispatch
//! guard parked once their recheck time passes, and un-parks runs of a remote workflow once a
//! worker announcing it is live again.

use std::sync::Arc;

use tokio::sync::watch;

use super::shared::Shared;
use crate::model::{Scope, TenantEventKind};
use crate::store::StoreError;

pub(crate) async fn sweep_loop(shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    let every = shared.config.lease.min(std::time::Duration::from_secs(5));
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            _ = tokio::time::sleep(every) => {}
        }
        if let Err(e) = sweep_once(&shared).await {
            tracing::warn!(error = %e, "sweeping abandoned runs failed; retrying next round");
        }
    }
}

/// One sweep; also run at start-up, before any claim.
pub(crate) async fn sweep_once(shared: &Shared) -> Result<(), StoreError> {
    let now = shared.clock.now();
    let ended = shared
        .store
        .sweep_abandoned(&shared.scope, shared.config.max_recoveries, now)
        .await?;
    for run in &ended {
        tracing::warn!(run_id = %run.id, status = %run.status, "ended a run its drivers abandoned");
        shared.emit(run, TenantEventKind::RunFailed, None);
    }
    if !ended.is_empty() {
        // Parents may have been settled.
        shared.wake.notify_one();
    }
    let rechecked = shared.store.wake_blocked(&shared.scope, now).await?;
    for run in &rechecked {
        tracing::debug!(run_id = %run.id, "a parked run looks again for a worker that can take its step");
    }
    if !rechecked.is_empty() {
        shared.wake.notify_one();
    }
    unpark_remote(shared, now).await
}

/// Runs parked because no worker served their workflow (one this process does not have) go
/// back to `pending` once a live worker on their partition announces it.
async fn unpark_remote(shared: &Shared, now: crate::model::Millis) -> Result<(), StoreError> {
    let Ok(groups) = shared.transport.worker_groups(&shared.scope).await else {
        return Ok(());
    };
    for group in groups {
        let Some(partition) = group.partition.clone() else {
            continue;
        };
        if shared.registry.latest(&group.name).is_some() || !shared.scope.admits(&partition) {
            continue;
        }
        // Remote workflows run on version 1 here (the wire's versions are the worker's).
        let served = [(group.name.clone(), 1)];
        let unparked = shared
            .store
            .unblock_runs(&Scope::Only(partition), &served, now)
            .await?;
        for run in &unparked {
            tracing::info!(run_id = %run.id, workflow = %run.workflow, "a worker serves this run's workflow again");
            shared.emit(run, TenantEventKind::RunStarted, None);
        }
        if !unparked.is_empty() {
            shared.wake.notify_one();
        }
    }
    Ok(())
}
