//! The sweep: ends runs whose drivers abandoned them (a run taken over `max_recoveries` times
//! goes `dead`; a `cancelling` run whose driver died goes `cancelled`), wakes runs the dispatch
//! guard parked once their recheck time passes or once a worker that can take their work
//! announces itself, un-parks runs of a remote workflow once a worker announcing it is live
//! again, and renews the leases of the concurrency slots held by steps still out.

use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::watch;

use crate::driver::dead_letter::dead_letter_run;
use crate::driver::state::State;
use crate::driver::turn::{flow, guard};
use crate::model::{MAX_PAGE_SIZE, Millis, RunQuery, RunStatus, Scope, TenantEventKind};
use crate::store::{RunPatch, StoreError};

pub(crate) async fn sweep_loop(state: Arc<State>, mut stop: watch::Receiver<bool>) {
    let every = state.config.lease.min(std::time::Duration::from_secs(5));
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            // Engine time: leases and rechecks come due on the engine's clock; wall time: a
            // worker that announces a run's workflow is found by looking again.
            () = state.pace(every) => {}
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
        if run.status == RunStatus::Dead
            && let Some(error) = &run.error
            && let Some(hook) = dead_letter_run(&state.registry, run, run.status, error)
        {
            // A second write after the bury (a turn that fails a run inserts its dead letter in
            // the same commit): a process that stops between the two leaves it unstarted. Its
            // id is derived from the run's, so it never starts twice.
            match state.store.create_run(hook, now, None).await {
                Ok(_) => state.queued(&run.namespace),
                Err(StoreError::Conflict(_)) => {}
                Err(e) => {
                    tracing::error!(run_id = %run.id, error = %e, "the dead run's dead-letter workflow could not start");
                }
            }
        }
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
    wake_capable(state, now).await?;
    flow::renew_slots(state, now).await?;
    unpark_remote(state, now).await
}

/// The most parked runs one sweep looks at for [`wake_capable`]; the others keep their
/// rechecks.
const LOOK_AT_MOST: usize = 1_000;

/// Runs the dispatch guard parked go back to `pending` as soon as a live worker that can take
/// the work they were parked for has announced itself on its token, instead of waiting out
/// their recheck (up to [`crate::driver::turn::backoff::MAX_RECHECK`]). Only those: a run no
/// worker can take yet costs a row read per sweep, not a turn. They keep their reason, as at a
/// recheck, so a turn that parks them again is not news.
async fn wake_capable(state: &State, now: Millis) -> Result<(), StoreError> {
    let mut query = RunQuery {
        status: Some(RunStatus::Blocked),
        limit: MAX_PAGE_SIZE,
        ..RunQuery::default()
    };
    let mut capable: HashMap<(String, Vec<String>), bool> = HashMap::new();
    let (mut looked, mut woken) = (0, false);
    loop {
        let page = state.store.list_runs(&state.scope, &query).await?;
        looked += page.runs.len();
        for run in page.runs {
            let Some(work) = run.error.as_ref().and_then(guard::parked_for) else {
                continue;
            };
            let can = match capable.get(&work) {
                Some(can) => *can,
                None => {
                    let can = guard::capable_worker_live(state, &work.0, &work.1).await;
                    capable.insert(work, can);
                    can
                }
            };
            if !can {
                continue;
            }
            let back = RunPatch {
                status: RunStatus::Pending,
                error: None,
            };
            let blocked = [RunStatus::Blocked];
            if let Some(run) = state
                .store
                .update_run_if(&state.scope, &run.id, &blocked, back, now)
                .await?
            {
                tracing::info!(run_id = %run.id, "a worker that can take a parked run's work announced itself; looking again");
                woken = true;
            }
        }
        match page.next_cursor {
            Some(cursor) if looked < LOOK_AT_MOST => query.cursor = Some(cursor),
            _ => break,
        }
    }
    if woken {
        state.wake.notify_one();
    }
    Ok(())
}

/// Runs parked because no worker served their workflow (one this process does not have) go
/// back to `pending` once a live worker on their partition announces it at their version. A
/// transport without remote turns has no such worker: nothing to look for, and no write.
async fn unpark_remote(state: &State, now: Millis) -> Result<(), StoreError> {
    if state.transport.remote_turns().is_none() {
        return Ok(());
    }
    let Ok(groups) = state.transport.worker_groups(&state.scope).await else {
        return Ok(());
    };
    for group in groups {
        let Some(partition) = group.partition.clone() else {
            continue;
        };
        if state.registry.latest(&group.name).is_some() || !state.scope.admits(partition.tenant()) {
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
            .unblock_runs(&Scope::Only(partition.tenant().clone()), &served, now)
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
