//! The transport's seam, split by concern. Every transport offers [`StepQueues`],
//! [`TenantEvents`], [`ControlChannel`], [`WorkerRegistry`], [`RunRequests`], [`RateLimits`],
//! [`Slots`] and [`DefinitionNotices`]; [`Transport`] is their sum, which the engine holds as `Arc<dyn Transport>`.
//! [`RemoteTurns`] is offered only where workers in other processes can run workflow turns: a
//! transport hands it out through [`Transport::remote_turns`], and one that cannot (the
//! in-process transport) does not implement it at all. Every transport passes one conformance
//! suite (`crate::transport::conformance`).

mod control;
mod definitions;
mod events;
mod rates;
mod remote_turns;
mod run_requests;
mod slots;
mod steps;
mod workers;

pub use control::ControlChannel;
pub use definitions::{DefinitionNotices, DefinitionsNotice};
pub use events::TenantEvents;
pub use rates::RateLimits;
pub use remote_turns::{RemoteTurns, TurnTask};
pub use run_requests::RunRequests;
pub use slots::{SlotClaim, Slots};
pub use steps::StepQueues;
pub use workers::WorkerRegistry;

/// Carries tasks, results, events and notices between the control plane and workers. The
/// engine cannot tell implementations apart, except by what [`Transport::remote_turns`] says.
pub trait Transport:
    StepQueues
    + TenantEvents
    + ControlChannel
    + WorkerRegistry
    + RunRequests
    + RateLimits
    + Slots
    + DefinitionNotices
{
    /// Remote workflow turns, if this transport reaches workers that run them.
    fn remote_turns(&self) -> Option<&dyn RemoteTurns>;
}
