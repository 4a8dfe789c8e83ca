//! Running workflow code: the authoring API ([`WorkflowContext`], [`StepContext`]), the
//! [`Registry`] of workflows and steps, one deterministic turn of replay ([`turn`]), the
//! [`Handlers`] a body registers for queries and updates, and the embedded step [`Worker`]. Nothing here knows which store or transport is in use.

mod cancel;
mod clock;
mod connections;
mod context;
mod decision;
mod error;
mod events;
mod handlers;
mod operation;
mod options;
mod registry;
pub mod remote_turn;
pub mod turn;
mod turn_state;
mod worker;

#[cfg(any(test, feature = "test-util"))]
pub use clock::TestClock;
pub use clock::{Clock, ClockSleep, SystemClock};
pub use connections::ConnectionSource;
pub use context::{Gather, StepContext, WorkflowContext, child_run_id};
pub use decision::{Command, Decision, DecisionStatus};
pub use error::{StepError, WorkflowError};
pub use handlers::{HandlerError, HandlerKind, Handlers};
pub use operation::Operation;
pub use options::StepOptions;
pub use registry::{RegisteredWorkflow, Registry};
pub use worker::{Worker, WorkerConfig};
