//! The results loop: apply each step result once and wake its run.

use std::sync::Arc;

use futures::{FutureExt, StreamExt};
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::drive::{FirstTurn, spawn_turns};
use super::shared::Shared;
use super::sticky::with_result;
use crate::model::{CheckpointStatus, StepResult, TenantEventKind, step_id};
use crate::transport::Subscription;

pub(crate) async fn results_loop(
    shared: Arc<Shared>,
    mut results: Subscription<StepResult>,
    mut stop: watch::Receiver<bool>,
) {
    // Results are applied concurrently, so the store commits a burst of them together.
    let mut applying = JoinSet::new();
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            next = results.next() => match next {
                Some(result) => {
                    applying.spawn(apply(shared.clone(), result));
                    while applying.try_join_next().is_some() {}
                }
                None => break,
            },
        }
    }
    // Results that already arrived are applied before stopping, so their steps do not re-run.
    while let Some(Some(result)) = results.next().now_or_never() {
        applying.spawn(apply(shared.clone(), result));
    }
    while applying.join_next().await.is_some() {}
}

/// How long a result whose step has no checkpoint yet waits between tries (ms), in all about
/// 1.4 s. Its step left early and the commit that records it is in flight on another control
/// plane (or failed: then the run's next turn sends the step again). Quadrupling keeps a busy
/// store, whose commits take tens of milliseconds, from being asked many times.
const EARLY_RESULT_WAITS: [u64; 6] = [1, 4, 16, 64, 256, 1024];

/// Applies one step result (see [`apply_once`]). A result whose step is not on record yet is
/// tried again for a while (see [`EARLY_RESULT_WAITS`]); a late or duplicate one is dropped.
pub(crate) async fn apply(shared: Arc<Shared>, result: StepResult) {
    if result.step_id != step_id(&result.run_id, result.seq) {
        tracing::warn!(step_id = %result.step_id, run_id = %result.run_id, seq = result.seq, "dropping a result whose stepId does not match runId:seq");
        return;
    }
    let mut result = result;
    let mut waits = EARLY_RESULT_WAITS.into_iter();
    loop {
        let Some(unapplied) = apply_once(&shared, result).await else {
            return;
        };
        match shared
            .store
            .checkpoints(&shared.scope, &unapplied.run_id)
            .await
        {
            Ok(on_record) if !on_record.iter().any(|c| c.seq == unapplied.seq) => {
                if let Some(ms) = waits.next() {
                    tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
                    result = unapplied;
                    continue;
                }
                tracing::warn!(run_id = %unapplied.run_id, seq = unapplied.seq, "dropped a step result: its step is still not on record (the turn that sent it did not commit, and the run sends it again)");
            }
            Ok(_) => {
                tracing::debug!(run_id = %unapplied.run_id, seq = unapplied.seq, "ignored a late or duplicate step result")
            }
            Err(e) => {
                tracing::warn!(run_id = %unapplied.run_id, seq = unapplied.seq, error = %e, "could not read a result's step; the step will be redispatched")
            }
        }
        return;
    }
}

/// Applies one step result: held if it beat the commit of the turn here that sent its step,
/// on the sticky fast path when this engine suspended the run and has a free turn slot, else
/// recorded in the store, which claims the run for a turn here when a slot is free. Hands the
/// result back if no checkpoint accepted it.
async fn apply_once(shared: &Arc<Shared>, result: StepResult) -> Option<StepResult> {
    let result = shared.turning.hold(result)?;
    if let Some(parked) = shared.sticky.take(&result.run_id)
        && let Some(history) = with_result(parked.history, &result, shared.clock.now())
        && let Some(slot) = shared.try_turn_slot()
    {
        spawn_turns(
            shared.clone(),
            parked.run,
            FirstTurn::Sticky(history, result),
            slot,
        );
        return None;
    }
    // With a free turn slot, the run is claimed in the same write and its turn runs here at
    // once; otherwise the drive loop picks it up.
    let slot = shared.try_turn_slot();
    let claim = slot.as_ref().map(|_| shared.claim());
    match shared
        .store
        .apply_step_result(&result, shared.clock.now(), claim.as_ref())
        .await
    {
        Ok(Some(applied)) => {
            let kind = if applied.checkpoint.status == CheckpointStatus::Completed {
                TenantEventKind::StepCompleted
            } else {
                TenantEventKind::StepFailed
            };
            shared.emit(&applied.run, kind, Some(applied.checkpoint.seq));
            match (slot, applied.claimed) {
                (Some(slot), Some(history)) => spawn_turns(
                    shared.clone(),
                    applied.run,
                    FirstTurn::Claimed(Some(history)),
                    slot,
                ),
                _ => shared.wake.notify_one(),
            }
        }
        Ok(None) => return Some(result),
        Err(e) => {
            tracing::warn!(run_id = %result.run_id, seq = result.seq, error = %e, "could not record a step result; the step will be redispatched")
        }
    }
    None
}
