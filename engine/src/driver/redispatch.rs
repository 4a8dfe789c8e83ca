//! The redispatch loop: a remote step whose result has not arrived within
//! `redispatch_after` is sent again with the same `step_id` (delivery is at-least-once).

use std::sync::Arc;

use tokio::sync::watch;

use super::shared::Shared;
use crate::model::{Checkpoint, Millis, Namespace, RemoteTask, step_id};
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

/// Marks remote step `cp` of a run in `namespace` dispatched at `stamp` and queues it again
/// with its `step_id`, so a worker that already ran it can tell.
pub(crate) async fn send_again(
    shared: &Shared,
    namespace: &Namespace,
    cp: Checkpoint,
    stamp: Millis,
) -> Result<(), StoreError> {
    let task = RemoteTask {
        step_id: step_id(&cp.run_id, cp.seq),
        group: cp
            .worker_group
            .clone()
            .unwrap_or_else(|| routing_token(&cp.name, Some(namespace))),
        run_id: cp.run_id.clone(),
        seq: cp.seq,
        name: cp.name,
        input: cp.input,
        context: Some(serde_json::json!({ "tenant": namespace })),
        attempt: cp.attempts.max(1),
    };
    shared
        .store
        .mark_dispatched(&cp.run_id, cp.seq, stamp)
        .await?;
    if let Err(e) = shared.transport.dispatch(task).await {
        tracing::warn!(run_id = %cp.run_id, seq = cp.seq, error = %e, "redispatch failed");
    }
    Ok(())
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
            // Stamp strictly after the cutoff so the next batch does not fetch this step again.
            let stamp = shared.clock.now().max(cutoff + 1);
            send_again(shared, &step.namespace, step.checkpoint, stamp).await?;
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
