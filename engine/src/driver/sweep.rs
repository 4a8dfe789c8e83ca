//! The sweep: ends runs whose drivers abandoned them. A run taken over `max_recoveries` times
//! goes `dead`; a `cancelling` run whose driver died goes `cancelled`.

use std::sync::Arc;

use tokio::sync::watch;

use super::shared::Shared;
use crate::model::TenantEventKind;
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
        shared.emit(run, TenantEventKind::RunFailed, None).await;
    }
    if !ended.is_empty() {
        // Parents may have been settled.
        shared.wake.notify_one();
    }
    Ok(())
}
