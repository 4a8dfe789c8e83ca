//! A turn, stage by stage: [`execute`] replays the workflow (here, or on a worker through
//! [`remote`]) and [`commit`] makes its decision a commit, the dispatch [`guard`] screens what it
//! sends (with the steps' rate and concurrency limits of [`flow`]), [`persist`] writes it under
//! the run's claim and carries out what follows, and [`runner`] chains a run's turns in one
//! task. [`first`] is a new run's first turn written with its insert; [`record`] records a step
//! result that no turn takes.

pub(crate) mod awaiting;
pub(crate) mod backoff;
pub(crate) mod commit;
pub(crate) mod execute;
pub(crate) mod first;
pub(crate) mod flow;
pub(crate) mod guard;
pub(crate) mod persist;
pub(crate) mod record;
pub(crate) mod remote;
pub(crate) mod runner;
