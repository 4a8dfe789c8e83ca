//! Schedules, kept beside the runs they start so that every control plane on one database sees
//! the same ones and fires each tick once.

use async_trait::async_trait;

use super::StoreResult;
use crate::model::{Millis, Namespace, Schedule, ScheduleId, Scope};

/// A schedule with what the control planes coordinate on.
#[derive(Clone, Debug, PartialEq)]
pub struct ScheduleRow {
    /// The schedule.
    pub schedule: Schedule,
    /// When a control plane should next look at it: its next tick plus jitter, a waiting
    /// tick's recheck, or the end of a claim; `None` while paused or with no tick left.
    pub due_at: Option<Millis>,
    /// Bumped by every write, so a write made from a stale copy is refused.
    pub revision: i64,
}

/// Schedules: per tenant, claimed by due time across control planes.
#[async_trait]
pub trait Schedules: Send + Sync + 'static {
    /// Stores a new schedule (its `revision` is stored as given) unless its tenant already has
    /// one under that id ([`crate::store::StoreError::Conflict`]) or holds `max_per_tenant`
    /// already ([`crate::store::StoreError::Refused`]).
    async fn create_schedule(&self, row: &ScheduleRow, max_per_tenant: usize) -> StoreResult<()>;

    /// The schedule `id` of `tenant`.
    async fn schedule(
        &self,
        tenant: &Namespace,
        id: &ScheduleId,
    ) -> StoreResult<Option<ScheduleRow>>;

    /// The schedules `scope` sees, by tenant then id, the first `limit` after `after` (a
    /// tenant and id).
    async fn schedules(
        &self,
        scope: &Scope,
        after: Option<(&str, &ScheduleId)>,
        limit: usize,
    ) -> StoreResult<Vec<ScheduleRow>>;

    /// Writes `row` over the stored schedule if it is still at `row.revision`, storing it at
    /// the next revision; whether it was written.
    async fn save_schedule(&self, row: &ScheduleRow) -> StoreResult<bool>;

    /// Deletes the schedule `id` of `tenant`; whether there was one.
    async fn delete_schedule(&self, tenant: &Namespace, id: &ScheduleId) -> StoreResult<bool>;

    /// Claims up to `limit` schedules `scope` sees that are due by `now`, earliest first: each
    /// is moved to `due_at = until` at the next revision, so no other control plane takes it
    /// before `until`, and returned as claimed.
    async fn claim_schedules(
        &self,
        scope: &Scope,
        now: Millis,
        until: Millis,
        limit: usize,
    ) -> StoreResult<Vec<ScheduleRow>>;

    /// The earliest `due_at` among the schedules `scope` sees.
    async fn next_schedule_due(&self, scope: &Scope) -> StoreResult<Option<Millis>>;
}
