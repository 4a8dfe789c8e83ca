//! What one tick does: the run it starts (its id derived from the tick), or why it starts none
//! (the previous run is still going and the overlap policy says skip or wait, the tick is older
//! than the catch-up window, the engine refused the start).

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::Timetable;
use crate::engine::{Engine, EngineError, StartRun};
use crate::model::{
    Millis, Overlap, RunId, Schedule, ScheduleSpec, Scope, TickOutcome, TickRecord,
};
use crate::store::ScheduleRow;

/// How often a tick waiting for the previous run to end (`buffer_one`) looks again.
const BUFFER_RECHECK: Millis = 1_000;
/// How soon a tick the store or transport failed is tried again.
const FAILED_RETRY: Millis = 2_000;
/// The most missed ticks of a cron expression counted one by one; the count stops there.
const MAX_COUNTED: u64 = 10_000;

/// The id of the run tick `tick` of `schedule` starts: the same on every control plane, so a
/// tick fired twice (a claim that lapsed mid-tick) starts one run; a manual trigger's tick has
/// milliseconds, a cron or interval tick whole seconds.
pub(super) fn tick_run_id(schedule: &Schedule, tick: Millis) -> Option<RunId> {
    let at = DateTime::<Utc>::from_timestamp_millis(tick)?;
    let stamp = if tick % 1_000 == 0 {
        at.format("%Y%m%dT%H%M%SZ")
    } else {
        at.format("%Y%m%dT%H%M%S%.3fZ")
    };
    RunId::parse(&format!("{}-{stamp}-{}", schedule.id, schedule.key)).ok()
}

/// How late tick `tick` of the schedule with `key` fires: fixed per tick, below `jitter`, the
/// same on every control plane.
pub(super) fn jitter_for(key: &str, tick: Millis, jitter: Millis) -> Millis {
    if jitter <= 0 {
        return 0;
    }
    let digest = Sha256::new()
        .chain_update(key.as_bytes())
        .chain_update(tick.to_be_bytes())
        .finalize();
    let mut head = [0u8; 8];
    head.copy_from_slice(&digest[..8]);
    (u64::from_be_bytes(head) % jitter.unsigned_abs()) as Millis
}

/// When a control plane should next look at `schedule`: its next tick (plus jitter), or sooner
/// to recheck a waiting tick; never while paused.
pub(super) fn due_at(schedule: &Schedule, now: Millis) -> Option<Millis> {
    let spec = &schedule.spec;
    if spec.paused {
        return None;
    }
    let tick = schedule
        .next_tick
        .map(|t| t + jitter_for(&schedule.key, t, spec.jitter.as_millis()));
    let recheck = schedule.buffered.map(|_| now + BUFFER_RECHECK);
    match (tick, recheck) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Handles a schedule the ticker claimed at `now`: a waiting tick whose previous run ended,
/// then the next tick if it is due, and writes the schedule back (unless a caller changed it
/// meanwhile, whose change then stands).
pub(super) async fn handle_claimed(engine: &Engine, mut row: ScheduleRow, now: Millis) {
    let schedule = &mut row.schedule;
    let table = match Timetable::new(&schedule.spec.cadence, &schedule.spec.timezone) {
        Ok(table) => table,
        Err(e) => {
            // Accepted once, so only a tz database that lost the zone gets here: the schedule
            // stops, saying why, until a caller fixes it.
            schedule.last = Some(record(now, now, TickOutcome::Refused, None, e.to_string()));
            schedule.next_tick = None;
            row.due_at = None;
            save(engine, &row).await;
            return;
        }
    };
    let handled = async {
        if let Some(tick) = schedule.buffered
            && !previous_running(engine, schedule).await?
        {
            schedule.buffered = None;
            start(engine, schedule, tick, now).await?;
        }
        let spec = &schedule.spec;
        let Some(mut tick) = schedule.next_tick else {
            return Ok(());
        };
        if tick + jitter_for(&schedule.key, tick, spec.jitter.as_millis()) > now {
            return Ok(());
        }
        let window_start = now - spec.catchup_window.as_millis();
        if tick < window_start {
            let first = table.next_after(window_start - 1);
            let count = missed(&table, tick, first.unwrap_or(Millis::MAX));
            schedule.missed = schedule.missed.saturating_add(count);
            let message = format!(
                "{count} tick{} older than the catch-up window ({}) when a control plane came to it",
                if count == 1 { " was" } else { "s were" },
                spec.catchup_window
            );
            schedule.last = Some(record(tick, now, TickOutcome::Missed, None, message));
            schedule.next_tick = first;
            match first {
                Some(first) if first <= now => tick = first,
                _ => return Ok(()),
            }
        }
        on_tick(engine, schedule, tick, now).await?;
        schedule.next_tick = table.next_after(tick);
        Ok::<_, EngineError>(())
    }
    .await;
    row.due_at = match handled {
        Ok(()) => due_at(&row.schedule, now),
        Err(e) => {
            tracing::warn!(schedule = %row.schedule.id, tenant = %row.schedule.namespace, error = %e, "a schedule's tick failed; trying it again shortly");
            Some(now + FAILED_RETRY)
        }
    };
    save(engine, &row).await;
}

/// Tick `tick` at `now`, by the schedule's overlap policy; the record says what it did.
pub(super) async fn on_tick(
    engine: &Engine,
    schedule: &mut Schedule,
    tick: Millis,
    now: Millis,
) -> Result<TickRecord, EngineError> {
    if let Some(id) = tick_run_id(schedule, tick)
        && engine
            .store()
            .get_run(&scope(schedule), &id)
            .await?
            .is_some()
    {
        // Fired already, by a control plane whose claim lapsed before it wrote the schedule.
        schedule.last_run = Some(id.clone());
        return Ok(noted(
            schedule,
            record(tick, now, TickOutcome::Started, Some(id), None),
        ));
    }
    if !previous_running(engine, schedule).await? {
        return start(engine, schedule, tick, now).await;
    }
    let outcome = match schedule.spec.overlap {
        Overlap::AllowAll => return start(engine, schedule, tick, now).await,
        Overlap::CancelPrevious => {
            if let Some(previous) = schedule.last_run.clone() {
                engine.cancel(&scope(schedule), &previous).await?;
            }
            let mut started = start(engine, schedule, tick, now).await?;
            if started.outcome == TickOutcome::Started {
                started.outcome = TickOutcome::Replaced;
            }
            return Ok(noted(schedule, started));
        }
        Overlap::BufferOne if schedule.buffered.is_none() => {
            schedule.buffered = Some(tick);
            TickOutcome::Buffered
        }
        Overlap::BufferOne | Overlap::Skip => TickOutcome::Skipped,
    };
    let message = schedule
        .last_run
        .as_ref()
        .map(|run| format!("run {run} was still going"));
    Ok(noted(schedule, record(tick, now, outcome, None, message)))
}

/// Starts the run of tick `tick`: a refusal (an unknown workflow, a plan's ceiling) is the
/// tick's outcome, a store or transport failure the caller's to retry.
async fn start(
    engine: &Engine,
    schedule: &mut Schedule,
    tick: Millis,
    now: Millis,
) -> Result<TickRecord, EngineError> {
    let Some(id) = tick_run_id(schedule, tick) else {
        let message = format!("tick {tick} has no run id");
        return Ok(noted(
            schedule,
            record(tick, now, TickOutcome::Refused, None, message),
        ));
    };
    let request = start_request(&schedule.spec, schedule, &id, tick);
    let outcome = match engine.start_run(request).await {
        Ok(run) => {
            schedule.last_run = Some(run.id.clone());
            record(tick, now, TickOutcome::Started, Some(run.id), None)
        }
        Err(EngineError::RunExists(id))
            if engine
                .store()
                .get_run(&scope(schedule), &id)
                .await?
                .is_some() =>
        {
            schedule.last_run = Some(id.clone());
            record(tick, now, TickOutcome::Started, Some(id), None)
        }
        Err(e) if e.is_callers() => record(tick, now, TickOutcome::Refused, None, e.to_string()),
        Err(e) => return Err(e),
    };
    Ok(noted(schedule, outcome))
}

fn start_request(spec: &ScheduleSpec, schedule: &Schedule, id: &RunId, tick: Millis) -> StartRun {
    let mut attributes = Map::new();
    attributes.insert("schedule".into(), Value::from(schedule.id.as_str()));
    if let Some(at) = DateTime::<Utc>::from_timestamp_millis(tick) {
        attributes.insert("scheduled_at".into(), Value::from(at.to_rfc3339()));
    }
    StartRun {
        workflow: spec.workflow.clone(),
        input: spec.input.clone(),
        namespace: Some(schedule.namespace.clone()),
        id: Some(id.clone()),
        tags: Vec::new(),
        search_attributes: attributes,
        timeout: None,
    }
}

/// Whether the run the schedule started last is still going.
async fn previous_running(engine: &Engine, schedule: &Schedule) -> Result<bool, EngineError> {
    let Some(previous) = &schedule.last_run else {
        return Ok(false);
    };
    let run = engine.store().get_run(&scope(schedule), previous).await?;
    Ok(run.is_some_and(|run| !run.status.is_terminal()))
}

/// How many ticks from `from` up to (not including) `until` were missed; an interval's are
/// counted by division, a cron expression's one by one up to [`MAX_COUNTED`].
fn missed(table: &Timetable, from: Millis, until: Millis) -> u64 {
    if let Some(every) = table.interval() {
        return ((until.saturating_sub(from) + every - 1) / every).max(1) as u64;
    }
    let mut count = 1;
    let mut at = from;
    while let Some(next) = table.next_after(at).filter(|n| *n < until) {
        count += 1;
        at = next;
        if count >= MAX_COUNTED {
            break;
        }
    }
    count
}

fn record(
    tick: Millis,
    at: Millis,
    outcome: TickOutcome,
    run_id: Option<RunId>,
    message: impl Into<Option<String>>,
) -> TickRecord {
    TickRecord {
        tick,
        at,
        outcome,
        run_id,
        message: message.into(),
    }
}

fn noted(schedule: &mut Schedule, record: TickRecord) -> TickRecord {
    schedule.last = Some(record.clone());
    record
}

fn scope(schedule: &Schedule) -> Scope {
    Scope::Only(schedule.namespace.clone())
}

async fn save(engine: &Engine, row: &ScheduleRow) {
    match engine.store().save_schedule(row).await {
        Ok(true) => {}
        Ok(false) => {
            tracing::debug!(schedule = %row.schedule.id, "a schedule changed while its tick ran; the change stands")
        }
        Err(e) => {
            tracing::warn!(schedule = %row.schedule.id, error = %e, "could not save a schedule after its tick; it is looked at again when its claim lapses")
        }
    }
}
