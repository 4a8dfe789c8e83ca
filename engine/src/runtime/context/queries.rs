//! The query and update handlers a workflow body registers on its context.

use std::fmt::Display;
use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::WorkflowContext;
use crate::runtime::error::decode;
use crate::runtime::handlers::{Handler, HandlerError, HandlerKind};

impl WorkflowContext {
    /// Answers query `name` with `handler(argument)` from now on (a later registration under the
    /// same name replaces this one). A query reads the state the run's history gives and
    /// changes nothing; `POST /api/v1/runs/{id}/query/{name}` and the run's page ask it.
    pub fn on_query<I, O, F>(&self, name: &str, handler: F)
    where
        I: DeserializeOwned,
        O: Serialize,
        F: Fn(I) -> O + Send + Sync + 'static,
    {
        let label = name.to_owned();
        let erased: Handler = Arc::new(move |argument| {
            let argument: I = decode(argument, &format!("the argument of query `{label}`"))
                .map_err(HandlerError::Argument)?;
            serde_json::to_value(handler(argument))
                .map_err(|e| HandlerError::Reply(label.clone(), e.to_string()))
        });
        self.state()
            .handlers
            .insert(HandlerKind::Query, name, erased);
    }

    /// Takes update `name` from now on: `handler` checks its argument against the run's state
    /// and returns the reply, or refuses it with a reason the caller sees (nothing is kept). An
    /// accepted update is kept with the run and its argument arrives as signal `name`; take it
    /// with [`WorkflowContext::wait_signal`]. The handler must not change the workflow's state
    /// itself: the body does, when it takes the signal, so a replay comes to the same state.
    pub fn on_update<I, O, E, F>(&self, name: &str, handler: F)
    where
        I: DeserializeOwned,
        O: Serialize,
        E: Display,
        F: Fn(I) -> Result<O, E> + Send + Sync + 'static,
    {
        let label = name.to_owned();
        let erased: Handler = Arc::new(move |argument| {
            let argument: I = decode(argument, &format!("the argument of update `{label}`"))
                .map_err(HandlerError::Argument)?;
            let reply = handler(argument).map_err(|reason| HandlerError::Refused {
                name: label.clone(),
                reason: reason.to_string(),
            })?;
            serde_json::to_value(reply)
                .map_err(|e| HandlerError::Reply(label.clone(), e.to_string()))
        });
        self.state()
            .handlers
            .insert(HandlerKind::Update, name, erased);
    }
}
