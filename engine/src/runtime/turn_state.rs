//! What one turn of a workflow body has seen and asked for so far: the state its
//! [`super::WorkflowContext`] handles share, and each suspended [`super::Operation`] counts on.

use std::collections::HashMap;

use super::handlers::Handlers;
use super::{Command, WorkflowError};
use crate::model::{BufferedSignal, Checkpoint, Millis};

pub(crate) struct TurnState {
    pub(super) next_seq: u32,
    pub(super) history: HashMap<u32, Checkpoint>,
    pub(crate) commands: Vec<Command>,
    pub(crate) nondeterminism: Option<WorkflowError>,
    /// Local steps executing right now; the turn is not over while any runs.
    pub(crate) local_in_flight: u32,
    /// A dry turn: a new local step is not run; the branch waits and
    /// [`TurnState::deferred_local`] is set (see [`super::turn::dry_turn`]).
    pub(crate) defer_local: bool,
    /// A dry turn reached a local step it did not run.
    pub(crate) deferred_local: bool,
    /// Durable operations the workflow is blocked on.
    pub(crate) awaiting: u32,
    /// When this turn started; timers due by then fire, new timers count from it.
    pub(super) now: Millis,
    /// The earliest pending timer, which the run must wake for.
    pub(crate) next_wake: Option<Millis>,
    /// Signals buffered for the run and not yet taken by a wait (this turn included).
    pub(super) signals: Vec<BufferedSignal>,
    /// The query and update handlers the body registered.
    pub(crate) handlers: Handlers,
}
