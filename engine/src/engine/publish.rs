//! Publishing an event to a tenant: it reaches the tenant's runs waiting for it
//! (`ctx.wait_event`) whose filters it passes, and starts the workflows a trigger names
//! (`Registry::trigger`). With an id, publishing it again changes nothing.

use serde_json::{Map, Value};

use super::input::check_payload;
use super::{Engine, EngineError, StartRun};
use crate::model::{
    EventId, EventOutcome, Namespace, PublishedEvent, RunId, Scope, TenantEventKind,
};
use crate::store::EventDelivered;

impl Engine {
    /// Publishes `event` to the tenant `scope` is: every live run of that tenant waiting for
    /// it whose filter it passes takes its payload (each once), and each workflow triggered by
    /// its name starts with the payload as input. Published again under its id, it reaches no
    /// run and starts nothing new: the outcome names the runs its triggers started. Refused
    /// for an operator's scope, which is no one tenant.
    pub async fn publish(
        &self,
        scope: &Scope,
        event: PublishedEvent,
    ) -> Result<EventOutcome, EngineError> {
        let Some(tenant) = scope.namespace() else {
            return Err(EngineError::BadInput(
                "an event is published to one tenant; publish it as that tenant (durable event --tenant NAME)".into(),
            ));
        };
        let limits = &self.state.config.limits;
        if event.name.is_empty() || event.name.trim() != event.name {
            return Err(EngineError::BadInput(
                "an event name must not be blank or have spaces around it (for example `order.paid`)"
                    .into(),
            ));
        }
        limits.check_name("the event name", &event.name)?;
        if let Some(key) = &event.key {
            limits.check_name("the event key", key)?;
        }
        check_payload(limits, "the event's payload", &event.payload)?;
        self.admit_payload(tenant, &event.payload).await?;

        let now = self.state.clock.now();
        let deliver = self.state.store.deliver_event(tenant, &event, now);
        let delivered = match self.as_caller(scope, "signals", deliver).await? {
            EventDelivered::Delivered(runs) => {
                for id in &runs {
                    if let Some(run) = self.state.store.get_run(scope, id).await? {
                        self.state
                            .emit(&run, TenantEventKind::for_status(run.status), None);
                    }
                }
                if !runs.is_empty() {
                    self.state.queued(tenant);
                }
                u32::try_from(runs.len()).unwrap_or(u32::MAX)
            }
            EventDelivered::Repeated(n) => n,
        };
        let mut started = Vec::new();
        let triggered = self.state.registry.triggered_by(&event.name).to_vec();
        for workflow in triggered {
            let id = event
                .id
                .as_ref()
                .map(|e| triggered_run_id(tenant, &workflow, e));
            let mut attributes = Map::new();
            attributes.insert("event".into(), Value::String(event.name.clone()));
            if let Some(event_id) = &event.id {
                attributes.insert("event_id".into(), Value::String(event_id.to_string()));
            }
            let start = StartRun {
                workflow,
                input: event.payload.clone(),
                namespace: Some(tenant.clone()),
                id,
                search_attributes: attributes,
                ..StartRun::default()
            };
            match self.start_own(start).await {
                Ok(run) => started.push(run.id),
                // Started when the event was first published under its id (the id is a digest
                // of the tenant's: no other tenant's run holds it).
                Err(EngineError::RunExists(id))
                    if self.state.store.get_run(scope, &id).await?.is_some() =>
                {
                    started.push(id)
                }
                Err(e) => return Err(e),
            }
        }
        Ok(EventOutcome { delivered, started })
    }
}

/// The id of the run event `event` of `tenant` starts of `workflow`: a digest of the three, so
/// publishing the event again finds that run, and no other tenant's event can name it.
fn triggered_run_id(tenant: &Namespace, workflow: &str, event: &EventId) -> RunId {
    use sha2::{Digest, Sha256};

    let digest = Sha256::digest(format!("{tenant}\0{workflow}\0{event}").as_bytes());
    let hex: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
    RunId::parse(&format!("evt_{hex}")).unwrap_or_else(|_| RunId::generate())
}
