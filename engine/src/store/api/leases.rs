//! Claims and leases: which driver turns which run, for how long, and whether its peers are
//! alive.

use crate::model::{Millis, Run, RunId, Scope};
use crate::store::{Runnable, StoreResult};
use async_trait::async_trait;

/// Claiming runs for turns, renewing and releasing their leases, and drivers' heartbeats.
#[async_trait]
pub trait Leases: Send + Sync + 'static {
    /// Leases up to `limit` runs that need a turn: pending ones, suspended ones whose `wake_at`
    /// has passed, and running ones whose lease expired (a crashed driver's). They come back
    /// `running`, locked by `owner` until `now + lease_ms`. A run already recovered
    /// `max_recoveries` times is left for [`Store::sweep_abandoned`].
    async fn claim_runs(
        &self,
        scope: &Scope,
        owner: &str,
        now: Millis,
        lease_ms: i64,
        limit: u32,
        max_recoveries: u32,
    ) -> StoreResult<Vec<Run>>;

    /// Runs of `scope` that [`Leases::claim_runs`] would take at `now`, for a fair pick between
    /// tenants: at most `per_tenant` of each tenant, taken round robin over its workflows
    /// (earliest due first within one), and `limit` in all, tenants' firsts before their
    /// seconds; runs due in the same millisecond by id (generated ids sort as created), so
    /// the fair pick's tie-break between tenants is the same on every read. Only a read:
    /// another driver may claim any of them first.
    async fn runnable_runs(
        &self,
        scope: &Scope,
        now: Millis,
        per_tenant: u32,
        limit: u32,
        max_recoveries: u32,
    ) -> StoreResult<Vec<Runnable>>;

    /// [`Leases::claim_runs`] for the runs of `ids` that still need a turn at `now`; the
    /// others (claimed meanwhile, ended, or not in `scope`) are left alone.
    ///
    /// Fresh runs (top-level, never started) are claimed only while fewer than their tenant's
    /// `max_concurrent_runs` of its top-level runs are started and not ended, and fewer than
    /// their key's limit of their workflow's runs with that key. The ceiling is read from the
    /// plans as stored and the counts taken in the claim's own transaction, so drivers racing
    /// on one database, or one whose cached plans predate a change, never claim past them. (A
    /// start on a control plane that has not seen a new ceiling yet, within a second, may still
    /// take the direct first-turn path; see `engine/quota.rs`.)
    async fn claim_these(
        &self,
        scope: &Scope,
        ids: &[RunId],
        owner: &str,
        now: Millis,
        lease_ms: i64,
        max_recoveries: u32,
    ) -> StoreResult<Vec<Run>>;

    /// Extends the leases `owner` holds on `ids`; returns how many were still held.
    async fn renew_leases(&self, owner: &str, ids: &[RunId], until: Millis) -> StoreResult<u64>;

    /// Notes that driver `owner` is alive until `alive_until`. The remote steps it dispatches
    /// count as lost once that passes (see [`LostDispatch::senders_gone_at`]): a transport that
    /// keeps tasks in its sender's memory loses them with the sender. A driver that stops
    /// cleanly beats with `alive_until = now`, so its steps are sent again at once.
    ///
    /// Returns how many other drivers are alive at `now` (their heartbeat has not lapsed): the
    /// other control planes on this store, which share its runs and, on a shared broker, its
    /// step results.
    async fn beat_driver(&self, owner: &str, alive_until: Millis, now: Millis) -> StoreResult<u32>;

    /// The earliest `wake_at` among suspended runs in `scope`, to sleep until then.
    async fn next_wake_at(&self, scope: &Scope) -> StoreResult<Option<Millis>>;

    /// Gives up `owner`'s leases so another driver (or a restart) takes the runs over at once.
    async fn release_leases(&self, owner: &str, now: Millis) -> StoreResult<u64>;
}
