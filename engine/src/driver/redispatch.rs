//! The redispatch loop: a remote step whose result has not arrived within
//! `redispatch_after` is sent again with the same `step_id` (delivery is at-least-once).

use std::sync::Arc;

use tokio::sync::watch;

use super::shared::Shared;
use crate::model::{Millis, RemoteTask};
use crate::store::StoreError;
use crate::transport::naming::routing_token;

const BATCH: u32 = 500;

pub(crate) async fn redispatch_loop(shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    let every = shared.config.redispatch_after / 2;
    let window = shared.config.redispatch_after.as_millis() as Millis;
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            _ = tokio::time::sleep(every) => {}
        }
        let cutoff = shared.clock.now() - window;
        if let Err(e) = redispatch_due(&shared, cutoff).await {
            tracing::warn!(error = %e, "redispatching lost steps failed; retrying next round");
        }
    }
}

/// Dispatches again every waiting remote step last sent at or before `cutoff`.
pub(crate) async fn redispatch_due(shared: &Shared, cutoff: Millis) -> Result<usize, StoreError> {
    let mut total = 0;
    loop {
        let steps = shared
            .store
            .pending_remote_steps(&shared.scope, cutoff, BATCH)
            .await?;
        let n = steps.len();
        for step in steps {
            let cp = step.checkpoint;
            let task = RemoteTask {
                step_id: format!("{}:{}", cp.run_id, cp.seq),
                group: cp
                    .worker_group
                    .clone()
                    .unwrap_or_else(|| routing_token(&cp.name, Some(&step.namespace))),
                run_id: cp.run_id.clone(),
                seq: cp.seq,
                name: cp.name,
                input: cp.input,
                context: Some(serde_json::json!({ "tenant": step.namespace })),
                attempt: cp.attempts.max(1),
            };
            // Stamp strictly after the cutoff so the next batch does not fetch this step again.
            shared
                .store
                .mark_dispatched(&cp.run_id, cp.seq, shared.clock.now().max(cutoff + 1))
                .await?;
            if let Err(e) = shared.transport.dispatch(task).await {
                tracing::warn!(run_id = %cp.run_id, seq = cp.seq, error = %e, "redispatch failed");
            }
        }
        total += n;
        if n < BATCH as usize {
            if total > 0 {
                tracing::info!(steps = total, "redispatched remote steps with no result");
            }
            return Ok(total);
        }
    }
}
