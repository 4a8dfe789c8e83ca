//! The control verbs through a [`SessionView`], each with the view's scope fixed: a run outside
//! it is [`Control::NotFound`] (or [`SignalSent::NotFound`]), exactly like a missing one.
//!
//! Failures map as everywhere on the dashboard: the user's mistakes with the engine's message,
//! anything else logged and answered as an internal error.

use durable::model::{EventOutcome, PublishedEvent, RunId};
use durable::store::SignalSent;
use durable::{Control, UpdateOutcome};
use serde_json::Value;

use super::SessionView;
use crate::AppError;
use crate::ssr::engine_error;

impl SessionView {
    /// Cancels run `id` if this view sees it.
    pub async fn cancel(&self, id: &RunId) -> Result<Control, AppError> {
        self.engine
            .cancel(self.scope(), id)
            .await
            .map_err(engine_error)
    }

    /// Cancels run `id` with compensation, if this view sees it.
    pub async fn cancel_compensating(&self, id: &RunId) -> Result<Control, AppError> {
        self.engine
            .cancel_compensating(self.scope(), id)
            .await
            .map_err(engine_error)
    }

    /// Re-drives a failed or dead run from its last good checkpoint, if this view sees it.
    pub async fn retry(&self, id: &RunId) -> Result<Control, AppError> {
        self.engine
            .retry(self.scope(), id)
            .await
            .map_err(engine_error)
    }

    /// Drives a blocked run again now, if this view sees it.
    pub async fn continue_run(&self, id: &RunId) -> Result<Control, AppError> {
        self.engine
            .continue_run(self.scope(), id)
            .await
            .map_err(engine_error)
    }

    /// Sends a visible run's waiting remote steps again now; with how many went out.
    pub async fn redispatch(&self, id: &RunId) -> Result<(Control, usize), AppError> {
        self.engine
            .redispatch(self.scope(), id)
            .await
            .map_err(engine_error)
    }

    /// Sends signal `name` with `payload` to run `id`, if this view sees it.
    pub async fn signal(
        &self,
        id: &RunId,
        name: &str,
        payload: Value,
    ) -> Result<SignalSent, AppError> {
        self.engine
            .signal(self.scope(), id, name, payload)
            .await
            .map_err(engine_error)
    }

    /// Starts a new run of a visible run's workflow with edited `input`, in the original's
    /// namespace.
    pub async fn retry_with_input(&self, id: &RunId, input: Value) -> Result<Control, AppError> {
        self.engine
            .retry_with_input(self.scope(), id, input)
            .await
            .map_err(engine_error)
    }

    /// Asks run `id` query `name`, if this view sees it (`None` when it does not).
    pub async fn query(
        &self,
        id: &RunId,
        name: &str,
        argument: Value,
    ) -> Result<Option<Value>, AppError> {
        self.engine
            .query(self.scope(), id, name, argument)
            .await
            .map_err(engine_error)
    }

    /// Sends run `id` update `name`, if this view sees it, under a fresh update id (a form
    /// sent twice is two updates, as two clicks are).
    pub async fn update(
        &self,
        id: &RunId,
        name: &str,
        argument: Value,
    ) -> Result<UpdateOutcome, AppError> {
        self.engine
            .update(self.scope(), id, name, argument, None)
            .await
            .map_err(engine_error)
    }

    /// Publishes `event` to this view's tenant (an operator's view, which is every tenant's,
    /// is refused: the engine says to publish as the tenant).
    pub async fn publish(&self, event: PublishedEvent) -> Result<EventOutcome, AppError> {
        self.engine
            .publish(self.scope(), event)
            .await
            .map_err(engine_error)
    }
}
