//! The store's seam, split by concern: a backend implements each capability trait, and
//! [`Store`] is the sum of them that the engine holds as `Arc<dyn Store>`. What needs one
//! concern only holds that trait (a [`crate::store::ScopedStore`] holds `Arc<dyn RunReads>`, so
//! a tenant's read view cannot write), and a backend's implementation reads as one block per
//! concern. Every backend passes one conformance suite (`crate::store::conformance`).
//!
//! Status changes are compare-and-set: a method that moves a run names the statuses (and the
//! lease) it expects, and returns `None` when the run was not in them, so a stale driver can
//! never resurrect a finished run.

mod control;
mod dispatches;
mod events;
mod leases;
mod plans;
mod reads;
mod retention;
mod turns;
mod upkeep;

pub use control::RunControl;
pub use dispatches::Dispatches;
pub use events::Events;
pub use leases::Leases;
pub use plans::Plans;
pub use reads::RunReads;
pub use retention::Retention;
pub use turns::Turns;
pub use upkeep::Upkeep;

use super::{Connections, Pools, Schedules, SharedPools};

/// Runs and checkpoints, as every backend stores them: every capability at once, which is what
/// an engine needs. Implemented for every type that has them all.
pub trait Store:
    RunReads
    + Turns
    + RunControl
    + Leases
    + Upkeep
    + Dispatches
    + Plans
    + Schedules
    + Pools
    + SharedPools
    + Connections
    + Events
    + Retention
{
}

impl<T> Store for T where
    T: RunReads
        + Turns
        + RunControl
        + Leases
        + Upkeep
        + Dispatches
        + Plans
        + Schedules
        + Pools
        + SharedPools
        + Connections
        + Events
        + Retention
{
}
