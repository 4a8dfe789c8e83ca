//! Waiting for events: a run takes an event published to its tenant while it waits.

use std::time::Duration;

use serde::de::DeserializeOwned;

use super::{Operation, StepError, WorkflowContext};
use crate::model::{EventFilter, event_signal};

impl WorkflowContext {
    /// Waits for event `name` published to this run's tenant (`POST /api/v1/events`) that
    /// passes `filter`, for at most `timeout` (forever when `None`). Returns its payload, or
    /// `None` on timeout. Only an event published while the run waits here reaches it, once; an
    /// earlier one is not kept for it (publish with a key, and wait with
    /// [`EventFilter::key`], to correlate).
    pub fn wait_event<T: DeserializeOwned>(
        &self,
        name: &str,
        filter: EventFilter,
        timeout: Option<Duration>,
    ) -> Operation<Result<Option<T>, StepError>> {
        // A filter is a key and a map of JSON values: it always serialises.
        let filter = serde_json::to_value(&filter).ok();
        self.wait_message(&event_signal(name), timeout, filter)
    }
}
