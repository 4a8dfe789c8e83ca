//! Query and update handlers: what a workflow answers about itself while it runs.
//!
//! A workflow body registers them ([`WorkflowContext::on_query`], [`WorkflowContext::on_update`]),
//! usually over state it shares with them (an `Arc<Mutex<_>>` the body updates as it goes). The
//! engine answers by replaying the run's history with no local step and nothing written
//! ([`super::turn::replay_handlers`]) and calling the handler registered last under the name,
//! so a handler reads the state the history gives, never a half-run step's.
//!
//! An update handler validates its argument and returns the reply; the engine then keeps the
//! update with its run and delivers its argument as signal `name`, which the body takes with
//! [`WorkflowContext::wait_signal`]. Refused, nothing is kept: the caller gets the handler's
//! reason. The reply is kept under the update's id, so a caller who repeats the update gets the
//! same reply and the run receives it once (the shared handlers of Restate's workflows work
//! this way).

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

/// A handler with its types erased: the argument in, the reply (or why not) out.
pub(crate) type Handler = Arc<dyn Fn(Value) -> Result<Value, HandlerError> + Send + Sync>;

/// Why a handler gave no reply.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HandlerError {
    /// The argument does not fit the handler's type.
    #[error("{0}")]
    Argument(String),
    /// The update handler refused the argument; nothing was kept.
    #[error("update `{name}` was refused: {reason}")]
    Refused {
        /// The update.
        name: String,
        /// The handler's reason.
        reason: String,
    },
    /// The handler's reply cannot be serialised (a bug in the workflow's code).
    #[error("the reply of `{0}` cannot be serialised: {1}")]
    Reply(String, String),
}

/// Which handlers a name is looked up among.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HandlerKind {
    /// Read-only: answered from the replayed state, nothing kept.
    Query,
    /// Validated, kept with the run, delivered as a signal, answered with a reply.
    Update,
}

impl HandlerKind {
    /// `query` or `update`.
    pub fn as_str(self) -> &'static str {
        match self {
            HandlerKind::Query => "query",
            HandlerKind::Update => "update",
        }
    }
}

/// The handlers one replay of a workflow body registered.
#[derive(Clone, Default)]
pub struct Handlers {
    queries: HashMap<String, Handler>,
    updates: HashMap<String, Handler>,
}

impl Handlers {
    fn of(&self, kind: HandlerKind) -> &HashMap<String, Handler> {
        match kind {
            HandlerKind::Query => &self.queries,
            HandlerKind::Update => &self.updates,
        }
    }

    /// Registers `handler` as the `kind` handler `name`, replacing an earlier one.
    pub(crate) fn insert(&mut self, kind: HandlerKind, name: &str, handler: Handler) {
        let handlers = match kind {
            HandlerKind::Query => &mut self.queries,
            HandlerKind::Update => &mut self.updates,
        };
        handlers.insert(name.to_owned(), handler);
    }

    /// Calls the `kind` handler `name` with `argument`; `None` when the body registered none.
    pub fn call(
        &self,
        kind: HandlerKind,
        name: &str,
        argument: Value,
    ) -> Option<Result<Value, HandlerError>> {
        let handler = self.of(kind).get(name)?.clone();
        Some(handler(argument))
    }

    /// The names of the `kind` handlers registered, sorted: what an unknown name's error lists.
    pub fn names(&self, kind: HandlerKind) -> Vec<String> {
        let mut names: Vec<String> = self.of(kind).keys().cloned().collect();
        names.sort();
        names
    }
}
