//! Concurrency slots shared by every control plane on one transport: at most N dispatches of a
//! step (per key) out at once in a tenant. A slot is held by one dispatch until its result is
//! recorded, under a lease the sweep renews while the dispatch is still out, so a slot whose
//! holder's run ended, or whose control plane died, comes back by itself. A dispatch that finds
//! no room is remembered as a waiter, and the release that frees a slot names the earliest one,
//! so it is woken at once instead of polling.

use async_trait::async_trait;

use crate::model::{Millis, Namespace, RunId};
use crate::transport::TransportResult;

/// Who takes a slot: the dispatch that holds it, the run to wake when it frees, and how many
/// may hold one at once.
#[derive(Clone, Copy, Debug)]
pub struct SlotClaim<'a> {
    /// The holder: one dispatch (`<run id>:<seq>`); taking again renews its lease.
    pub holder: &'a str,
    /// The run that waits for a slot when there is no room.
    pub waiter: &'a RunId,
    /// How many holders the slots admit.
    pub limit: u32,
    /// When the holder's lease runs out unless renewed.
    pub until: Millis,
}

/// Taking, renewing and giving back slots of named counters ([`crate::model::Concurrency`]).
#[async_trait]
pub trait Slots: Send + Sync + 'static {
    /// Takes one of `tenant`'s slots `counter` for `claim.holder`, if fewer than `claim.limit`
    /// live holders (leases after `now`) hold one; a holder that has one keeps it, renewed.
    /// Without room, `claim.waiter` joins the counter's waiters (once, keeping its place) and
    /// `false` is returned. The tenant is part of the key: one tenant never holds another's.
    async fn acquire(
        &self,
        tenant: &Namespace,
        counter: &str,
        claim: SlotClaim<'_>,
        now: Millis,
    ) -> TransportResult<bool>;

    /// Extends `holder`'s lease to `until` (it is `now`), whether or not there is room: its
    /// dispatch is out.
    async fn renew(
        &self,
        tenant: &Namespace,
        counter: &str,
        holder: &str,
        until: Millis,
        now: Millis,
    ) -> TransportResult<()>;

    /// Gives `holder`'s slot back (a no-op if it holds none) and takes the earliest waiter off
    /// the counter's list: the run to wake, which takes the slot on its next turn.
    async fn release(
        &self,
        tenant: &Namespace,
        counter: &str,
        holder: &str,
    ) -> TransportResult<Option<RunId>>;
}
