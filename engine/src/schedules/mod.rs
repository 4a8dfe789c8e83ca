//! Schedules: a tenant's standing orders to start a workflow on a cron expression or an
//! interval.
//!
//! - [`timetable`]: fire times, with a time zone's daylight saving changes;
//! - `verbs`: creating, reading, changing, deleting and triggering schedules on the [`Engine`]
//!   (each call names its tenant, taken from the session or token by the caller);
//! - `tick`: what one tick does, by the schedule's overlap policy and catch-up window;
//! - `ticker`: the loop every control plane runs, claiming due schedules from the store.
//!
//! **One start per tick.** A tick's run id is derived from the schedule, its random key and
//! the tick's time, and the ticker claims a schedule in the store before firing it, so however
//! many control planes run, and whichever of them crashes mid-tick, a tick starts one run.
//!
//! **Engine-internal.** Claiming and rescheduling are the `system` lane's writes, never queued
//! behind a tenant's backlog; the start itself is the tenant's, under its plan like any other.
//!
//! [`Engine`]: crate::engine::Engine

mod tick;
mod ticker;
pub mod timetable;
mod verbs;

pub(crate) use ticker::ticker_loop;
pub use timetable::{Timetable, wall_clock};
pub use verbs::next_fires;
