//! Hears the definition notices of every control plane: an edit made elsewhere drops this
//! engine's copy of its tenant's definitions at once and is acknowledged, so the editing plane
//! can answer knowing this one routes by the edit from its next turn on; an acknowledgement is
//! noted for an edit made here.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::watch;

use crate::driver::state::State;
use crate::transport::DefinitionsNotice;

/// How long a failed subscription waits before it is tried again.
const RETRY: Duration = Duration::from_secs(1);

/// Hears notices until `stop`.
pub(crate) async fn definitions_loop(state: Arc<State>, mut stop: watch::Receiver<bool>) {
    loop {
        let mut notices = match state.transport.subscribe_definitions().await {
            Ok(notices) => notices,
            Err(e) => {
                tracing::warn!(error = %e, "could not hear definition notices; a tenant's edits made elsewhere reach this engine by its periodic check until it can");
                tokio::select! {
                    _ = stop.changed() => return,
                    () = tokio::time::sleep(RETRY) => continue,
                }
            }
        };
        loop {
            tokio::select! {
                _ = stop.changed() => return,
                notice = notices.next() => match notice {
                    Some(notice) => heard(&state, notice).await,
                    None => break,
                },
            }
        }
    }
}

async fn heard(state: &State, notice: DefinitionsNotice) {
    let DefinitionsNotice {
        tenant,
        version,
        seen_by,
    } = notice;
    match seen_by {
        Some(by) => state.definitions.note_ack(&tenant, version, &by),
        None => {
            state.definitions.forget_before(&tenant, version);
            let ack = DefinitionsNotice {
                tenant,
                version,
                seen_by: Some(state.config.owner.clone()),
            };
            if let Err(e) = state.transport.publish_definitions(ack).await {
                tracing::debug!(error = %e, "could not acknowledge a definitions notice");
            }
        }
    }
}
