//! Fairness between tenants wherever work waits for a shared resource (SPEC §8): claiming due
//! runs, turn slots, the commit queue, step dispatch and timer wake-ups. One policy serves every
//! stage: [`FairQueue`] picks the tenant whose share is furthest behind, then that tenant's keys
//! (a workflow, or a concurrency key the author chooses) in turn, then each key's earliest work,
//! so a tenant with thousands of waiting items spread over many keys gets no more than its
//! weighted share while another tenant waits. [`Shares`] bounds what a tenant holds of the turn
//! slots by its weight while others wait, so slots taken directly cannot outrun the fair pick.
//! [`Headroom`] keeps the last few slots of a shared step worker for tenants that hold none, so
//! a newcomer's step does not wait for a busy tenant's to end. A store's group commit serves its
//! queued writes in that order too, each in the [`Lane`] of its tenant. [`rate`] is the
//! allowance arithmetic behind per-minute ceilings, shared by every counter that enforces one.

mod headroom;
mod lane;
mod queue;
pub mod rate;
mod shares;

pub use headroom::Headroom;
pub use lane::{Lane, within};
pub use queue::{FairQueue, Weight};
pub use shares::{Shares, Slot};
