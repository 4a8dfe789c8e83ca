//! What callers do with schedules. Each call names the tenant, which the caller took from the
//! session or the verified token, never from the request; a schedule of another tenant is not
//! found.

use super::Timetable;
use super::tick::{due_at, on_tick};
use crate::engine::{Engine, EngineError};
use crate::model::{
    Millis, Namespace, Schedule, ScheduleError, ScheduleId, SchedulePatch, ScheduleSpec, Scope,
    TickRecord,
};
use crate::store::{ScheduleRow, StoreError};

/// How many times a change is tried against a schedule the ticker keeps writing.
const SAVE_TRIES: usize = 8;

/// The next `n` times `schedule` fires (none while paused); its next tick first.
pub fn next_fires(schedule: &Schedule, n: usize) -> Vec<Millis> {
    if schedule.spec.paused {
        return Vec::new();
    }
    let (Some(first), Ok(table)) = (
        schedule.next_tick,
        Timetable::new(&schedule.spec.cadence, &schedule.spec.timezone),
    ) else {
        return Vec::new();
    };
    let mut times = vec![first];
    times.extend(table.upcoming(first, n.saturating_sub(1)));
    times.truncate(n);
    times
}

impl Engine {
    /// Creates schedule `id` of `tenant`. Refused, with what to fix, if the cadence, time zone,
    /// workflow or input is wrong, if the tenant has a schedule under `id`, or if it holds the
    /// most schedules allowed.
    pub async fn create_schedule(
        &self,
        tenant: &Namespace,
        id: ScheduleId,
        spec: ScheduleSpec,
    ) -> Result<Schedule, EngineError> {
        let table = self.check_schedule(tenant, &spec).await?;
        let now = self.state.clock.now();
        let key = uuid::Uuid::new_v4().simple().to_string()[..8].to_owned();
        let schedule = Schedule {
            id: id.clone(),
            namespace: tenant.clone(),
            next_tick: table.next_after(now),
            spec,
            buffered: None,
            last_run: None,
            last: None,
            missed: 0,
            key,
            created_at: now,
            updated_at: now,
        };
        // A random first revision: a ticker still writing from a deleted schedule's revision
        // never matches the one recreated under its id.
        let revision = (uuid::Uuid::new_v4().as_u128() >> 66) as i64;
        let row = ScheduleRow {
            due_at: due_at(&schedule, now),
            schedule,
            revision,
        };
        let limit = self.state.config.limits.max_schedules;
        match self.state.store.create_schedule(&row, limit).await {
            Err(StoreError::Conflict(_)) => return Err(EngineError::ScheduleExists(id)),
            created => created?,
        }
        self.state.schedules_changed.notify_one();
        Ok(row.schedule)
    }

    /// Schedule `id` of `tenant`.
    pub async fn schedule(
        &self,
        tenant: &Namespace,
        id: &ScheduleId,
    ) -> Result<Option<Schedule>, EngineError> {
        let row = self.state.store.schedule(tenant, id).await?;
        Ok(row.map(|row| row.schedule))
    }

    /// The schedules `scope` sees, by tenant and id: the first `limit` after `after`.
    pub async fn schedules(
        &self,
        scope: &Scope,
        after: Option<(&str, &ScheduleId)>,
        limit: usize,
    ) -> Result<Vec<Schedule>, EngineError> {
        let rows = self.state.store.schedules(scope, after, limit).await?;
        Ok(rows.into_iter().map(|row| row.schedule).collect())
    }

    /// Changes schedule `id` of `tenant`; `None` if it has none. A change of cadence, time zone
    /// or jitter, and a resume, count the next tick from now: ticks that fell while paused are
    /// not fired.
    pub async fn update_schedule(
        &self,
        tenant: &Namespace,
        id: &ScheduleId,
        patch: &SchedulePatch,
    ) -> Result<Option<Schedule>, EngineError> {
        let mut checked = None;
        for _ in 0..SAVE_TRIES {
            let Some(mut row) = self.state.store.schedule(tenant, id).await? else {
                return Ok(None);
            };
            let spec = patch.apply(&row.schedule.spec);
            if checked.as_ref() != Some(&spec) {
                self.check_schedule(tenant, &spec).await?;
                checked = Some(spec.clone());
            }
            let now = self.state.clock.now();
            let schedule = &mut row.schedule;
            if patch.retimes() && !spec.paused {
                let table = Timetable::new(&spec.cadence, &spec.timezone)?;
                schedule.next_tick = table.next_after(now);
            }
            schedule.spec = spec;
            schedule.updated_at = now;
            row.due_at = due_at(schedule, now);
            if self.state.store.save_schedule(&row).await? {
                self.state.schedules_changed.notify_one();
                return Ok(Some(row.schedule));
            }
        }
        Err(busy(id))
    }

    /// Deletes schedule `id` of `tenant`; whether it had one. Runs it started are left alone.
    pub async fn delete_schedule(
        &self,
        tenant: &Namespace,
        id: &ScheduleId,
    ) -> Result<bool, EngineError> {
        Ok(self.state.store.delete_schedule(tenant, id).await?)
    }

    /// Fires schedule `id` of `tenant` now, by its overlap policy, whether paused or not; what
    /// the tick did, or `None` if it has no such schedule.
    pub async fn trigger_schedule(
        &self,
        tenant: &Namespace,
        id: &ScheduleId,
    ) -> Result<Option<TickRecord>, EngineError> {
        let now = self.state.clock.now();
        let mut fired: Option<TickRecord> = None;
        for _ in 0..SAVE_TRIES {
            let Some(mut row) = self.state.store.schedule(tenant, id).await? else {
                return Ok(None);
            };
            let record = match &fired {
                // Fired on an earlier try whose write lost to the ticker: note it again.
                Some(record) => {
                    if record.run_id.is_some() {
                        row.schedule.last_run.clone_from(&record.run_id);
                    }
                    row.schedule.last = Some(record.clone());
                    record.clone()
                }
                None => {
                    let tick = trigger_tick(&row.schedule, now);
                    on_tick(self, &mut row.schedule, tick, now).await?
                }
            };
            row.due_at = due_at(&row.schedule, now);
            fired = Some(record.clone());
            if self.state.store.save_schedule(&row).await? {
                self.state.schedules_changed.notify_one();
                return Ok(Some(record));
            }
        }
        Err(busy(id))
    }

    /// Refuses a schedule whose cadence, time zone, workflow or input is wrong; its timetable.
    async fn check_schedule(
        &self,
        tenant: &Namespace,
        spec: &ScheduleSpec,
    ) -> Result<Timetable, EngineError> {
        let table = Timetable::new(&spec.cadence, &spec.timezone)?;
        // A tick fires up to its jitter late; one that late must still be inside the window,
        // or it would be counted missed.
        if spec.catchup_window.as_millis() < spec.jitter.as_millis() + 1_000 {
            return Err(ScheduleError::Interval(format!(
                "the catch-up window ({}) must be at least a second longer than the jitter ({}); raise `catchup_window` or lower `jitter`",
                spec.catchup_window, spec.jitter
            ))
            .into());
        }
        let limits = &self.state.config.limits;
        if spec.workflow.trim().is_empty() {
            return Err(EngineError::BadInput(
                "`workflow` must name a registered workflow".into(),
            ));
        }
        limits.check_name("the workflow name", &spec.workflow)?;
        crate::engine::check_payload(limits, "the input", &spec.input)?;
        let known = self.registry().latest(&spec.workflow).is_some()
            || !crate::driver::turn::remote::served_versions(
                &self.state,
                &spec.workflow,
                &tenant.clone().into(),
            )
            .await
            .is_empty();
        if !known {
            return Err(EngineError::UnknownWorkflow(
                spec.workflow.clone(),
                self.registry().workflow_names().join(", "),
            ));
        }
        Ok(table)
    }
}

/// A trigger's tick: now, with milliseconds so it never shares a run id with a cadence's
/// tick (whole seconds), and after the schedule's last tick so two triggers within one
/// millisecond are two.
fn trigger_tick(schedule: &Schedule, now: Millis) -> Millis {
    let after_last = schedule
        .last
        .as_ref()
        .map_or(now, |last| now.max(last.tick + 1));
    if after_last % 1_000 == 0 {
        after_last + 1
    } else {
        after_last
    }
}

fn busy(id: &ScheduleId) -> EngineError {
    EngineError::Store(StoreError::Refused(format!(
        "schedule `{id}` kept changing while this change was made; try again"
    )))
}
