//! Delivering a published event: to each of its tenant's live runs waiting for it whose filter
//! it passes, by resolving that very wait (never a buffered signal another wait could take), and
//! once per event id.
//!
//! One rule, two dialects: each store supplies the statements ([`EventStatements`]) in its SQL.

use serde_json::Value;

use super::settle::Resolution;
use super::turn::TurnStatements;
use crate::model::{
    CheckpointKind, EventFilter, EventId, Millis, Namespace, PublishedEvent, RunId, event_signal,
};
use crate::store::{EventDelivered, StoreResult};

/// The statements an event's delivery needs.
pub(crate) trait EventStatements: TurnStatements {
    /// How many runs event `id` of `tenant` reached, if it was delivered before.
    async fn delivered_before(
        &mut self,
        tenant: &Namespace,
        id: &EventId,
    ) -> StoreResult<Option<u32>>;

    /// The pending waits for signal `signal` of `tenant`'s live runs: run, position and the
    /// filter kept with the wait.
    async fn waits_for(
        &mut self,
        tenant: &Namespace,
        signal: &str,
    ) -> StoreResult<Vec<(RunId, u32, Option<Value>)>>;

    /// Keeps event `id` of `tenant` as delivered to `delivered` runs.
    async fn keep_event(
        &mut self,
        tenant: &Namespace,
        id: &EventId,
        name: &str,
        delivered: u32,
        now: Millis,
    ) -> StoreResult<()>;
}

/// [`crate::store::Events::deliver_event`] inside a write transaction.
pub(crate) async fn deliver_event<S: EventStatements>(
    s: &mut S,
    tenant: &Namespace,
    event: &PublishedEvent,
    now: Millis,
) -> StoreResult<EventDelivered> {
    if let Some(id) = &event.id
        && let Some(delivered) = s.delivered_before(tenant, id).await?
    {
        return Ok(EventDelivered::Repeated(delivered));
    }
    let signal = event_signal(&event.name);
    let mut reached: Vec<RunId> = Vec::new();
    for (run, seq, filter) in s.waits_for(tenant, &signal).await? {
        // A filter that no longer reads (it never should) takes nothing, rather than all.
        let filter = match filter {
            None => EventFilter::any(),
            Some(raw) => match serde_json::from_value::<EventFilter>(raw) {
                Ok(filter) => filter,
                Err(_) => continue,
            },
        };
        if !filter.matches(event) {
            continue;
        }
        let got = Resolution::Completed(Some(S::json(&event.payload)));
        let resolved = s
            .resolve_pending(&run, i64::from(seq), CheckpointKind::Signal, got, now)
            .await?;
        if resolved == 0 {
            continue;
        }
        if !reached.contains(&run) {
            s.wake(&run, now).await?;
            reached.push(run);
        }
    }
    if let Some(id) = &event.id {
        let delivered = u32::try_from(reached.len()).unwrap_or(u32::MAX);
        s.keep_event(tenant, id, &event.name, delivered, now)
            .await?;
    }
    Ok(EventDelivered::Delivered(reached))
}
