//! What both stores compute the same way, written once: one rule, two dialects.
//!
//! A store's write is a sequence of statements that rules choose: which waits a turn resolves
//! and in what order, how a child's end settles its parent, when a failed step is tried again,
//! which filters a list applies. Those rules live here, so the SQLite and PostgreSQL stores
//! cannot drift apart; each store keeps only its SQL and its I/O. A shared flow is generic over
//! the statements it needs, a trait each file here declares (`Settle`, `TurnStatements`,
//! `ResultStatements`, `LifecycleStatements`, `EventStatements`) and each store implements on its connection in the
//! file of the same name. The flows are `async`: PostgreSQL awaits them on its connection, and
//! SQLite, whose statements never wait, runs them to their end in one poll (`at_once` in
//! `sqlite/writer.rs`).
//!
//! - `turn.rs`: a turn's commit: the run's next row and the writes after the run moved;
//! - `result.rs`: recording a step's result and waking (or claiming) its run;
//! - `settle.rs`: resolving waits: a failed step's retry, a parent's wait on its child;
//! - `lifecycle.rs`: the control verbs' and the sweep's rules;
//! - `events.rs`: a published event's delivery to the runs waiting for it;
//! - `filters.rs`: a list query's filters and its page;
//! - `reads.rs`: counts both stores aggregate alike;
//! - `plans.rs`: how plans are keyed and a tenant's usage is counted;
//! - `pools.rs`: how many pools a tenant holds, and what a put keeps;
//! - `retention.rs`: which runs a deletion of expired history may take;
//! - `activity.rs`: how the activity minutes are keyed, added to and read back;
//! - `statement.rs`: the builder both dialects implement, through which a statement they both
//!   run is written once.

pub(crate) mod activity;
pub(crate) mod connections;
pub(crate) mod events;
pub(crate) mod filters;
pub(crate) mod lifecycle;
pub(crate) mod plans;
pub(crate) mod pools;
pub(crate) mod reads;
pub(crate) mod result;
pub(crate) mod retention;
pub(crate) mod settle;
pub(crate) mod statement;
pub(crate) mod turn;
