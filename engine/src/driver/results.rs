//! The results loop: apply each step result once and wake its run.

use std::sync::Arc;

use futures::{FutureExt, StreamExt};
use tokio::sync::watch;

use super::shared::Shared;
use crate::model::{CheckpointStatus, StepResult, TenantEventKind};
use crate::transport::Subscription;

pub(crate) async fn results_loop(
    shared: Arc<Shared>,
    mut results: Subscription<StepResult>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            next = results.next() => match next {
                Some(result) => apply(&shared, result).await,
                None => return,
            },
        }
    }
    // Results that already arrived are applied before stopping, so their steps do not re-run.
    while let Some(Some(result)) = results.next().now_or_never() {
        apply(&shared, result).await;
    }
}

async fn apply(shared: &Shared, result: StepResult) {
    if result.step_id != format!("{}:{}", result.run_id, result.seq) {
        tracing::warn!(step_id = %result.step_id, run_id = %result.run_id, seq = result.seq, "dropping a result whose stepId does not match runId:seq");
        return;
    }
    match shared
        .store
        .apply_step_result(&result, shared.clock.now())
        .await
    {
        Ok(Some(applied)) => {
            shared.wake.notify_one();
            let kind = if applied.checkpoint.status == CheckpointStatus::Completed {
                TenantEventKind::StepCompleted
            } else {
                TenantEventKind::StepFailed
            };
            shared
                .emit(&applied.run, kind, Some(applied.checkpoint.seq))
                .await;
        }
        Ok(None) => {
            tracing::debug!(run_id = %result.run_id, seq = result.seq, "ignored a late or duplicate step result")
        }
        Err(e) => {
            tracing::warn!(run_id = %result.run_id, seq = result.seq, error = %e, "could not record a step result; the step will be redispatched")
        }
    }
}
