//! What exists only for speed. Each piece can be deleted and every run still completes with the
//! same checkpoints, only slower; each says in its own docs what it saves and which bench shows
//! it.
//!
//! - [`in_flight`]: runs this engine is working on, with the results that arrive meanwhile, so
//!   a turn's new steps may leave before its commit lands and their results wait for it here.
//! - [`parked`]: the histories of runs this engine last suspended, so a step result becomes
//!   "result + next turn" in one write, with no read.
//! - [`ahead`]: a result that arrives while its run's commit is in flight is turned at once on
//!   the history that commit will leave.

pub(crate) mod ahead;
pub(crate) mod in_flight;
pub(crate) mod parked;

pub(crate) use in_flight::InFlight;
pub(crate) use parked::{Parked, ParkedRuns};
