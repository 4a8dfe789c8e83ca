//! The engine's long-running loops, one per file. Each runs until the engine's stop signal and
//! works only inside the engine's scope (an operator engine's scope is every namespace).
//!
//! - [`activity`]: adds the step run times recorded here to the activity minutes.
//! - [`claim`]: claims due runs and starts their turns.
//! - [`counts`]: folds the run counts' deltas into their totals.
//! - [`definitions`]: hears other control planes' edits of tenants' definitions.
//! - [`results`]: applies step results, on the sticky path when it can.
//! - [`redispatch`]: sends again the steps whose dispatch may be lost.
//! - [`retention`]: deletes history older than its tenant's plan keeps it.
//! - [`shared_pools`]: tells shared pools' workers the tenants they serve, at their weights.
//! - [`sweep`]: buries runs their drivers abandoned, wakes parked runs.
//! - [`lease`]: renews the leases of runs turning here, and the driver's heartbeat.
//! - [`replies`]: what workers send back about remote work (decisions, beats, step events).

pub(crate) mod activity;
pub(crate) mod claim;
pub(crate) mod counts;
pub(crate) mod definitions;
pub(crate) mod lease;
pub(crate) mod redispatch;
pub(crate) mod replies;
pub(crate) mod results;
pub(crate) mod retention;
pub(crate) mod shared_pools;
pub(crate) mod sweep;
