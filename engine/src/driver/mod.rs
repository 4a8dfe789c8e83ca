//! The driver: what moves runs forward once they exist. [`loops`] are the long-running tasks
//! (claiming due runs, applying results, redispatching, sweeping, renewing leases, hearing
//! workers' replies); [`turn`] is the path one turn takes through its stages; [`fast_path`] is
//! what exists only for speed; [`state`] is what they all share. Everything works inside the
//! engine's scope: a namespaced engine sees only its namespace, an operator engine all of them.
//!
//! The public face is [`crate::Engine`], which starts these loops and hands them requests;
//! [`EngineConfig`] says how they run.

mod config;
pub(crate) mod connections;
pub(crate) mod dead_letter;
pub(crate) mod definitions;
pub(crate) mod fast_path;
pub(crate) mod loops;
pub(crate) mod plans;
mod publisher;
pub(crate) mod routing;
pub(crate) mod state;
pub(crate) mod step_tallies;
pub(crate) mod turn;
pub(crate) mod vanished_jobs;

pub use config::EngineConfig;
