//! The schedules page's server functions. Each opens the session's view, which fixes the
//! tenant; a form field never names one.

// A server function takes its form's fields as arguments, one each; the macro's generated
// client function does not carry an item-level allow.
#![allow(clippy::too_many_arguments)]

use leptos::prelude::*;

use crate::{AppError, SchedulesView};

/// How many fire times the page shows for a schedule and for the form's preview.
#[cfg(feature = "ssr")]
const SHOWN: usize = 5;

/// The session tenant's schedules and the workflows a schedule can start.
#[server(endpoint = "list_schedules")]
pub async fn list_schedules() -> Result<SchedulesView, AppError> {
    crate::ssr::reply(
        async move {
            use durable::schedules::{next_fires, wall_clock};

            use crate::ShownSchedule;
            use crate::ssr::{Need, SessionView};

            let view = SessionView::open(Need::Read, None).await?;
            let schedules = view
                .schedules()
                .await?
                .into_iter()
                .map(|schedule| {
                    let zone = &schedule.spec.timezone;
                    let next = next_fires(&schedule, SHOWN)
                        .into_iter()
                        .map(|at| wall_clock(at, zone))
                        .collect();
                    ShownSchedule { schedule, next }
                })
                .collect();
            Ok(SchedulesView {
                schedules,
                workflows: view.workflow_names(),
                can_act: view.user().role.can_act(),
            })
        }
        .await,
    )
}

/// The next fire times of a cadence (`kind` is `cron` or `every`) in `timezone`, as its wall
/// clock shows them, or what is wrong with it: the form checks the expression as it is typed.
#[server(endpoint = "preview_schedule")]
pub async fn preview_schedule(
    kind: String,
    expression: String,
    timezone: String,
) -> Result<Vec<String>, AppError> {
    crate::ssr::reply(
        async move {
            use durable::runtime::{Clock, SystemClock};
            use durable::schedules::{Timetable, wall_clock};

            use crate::ssr::{Need, SessionView};

            SessionView::open(Need::Read, None).await?;
            let fields = fields_of(&kind, &expression, &timezone)?;
            let (cadence, zone) = match fields.patch() {
                Ok(patch) => (patch.cadence, patch.timezone.unwrap_or_default()),
                Err(e) => return Err(AppError::Invalid(e.to_string())),
            };
            let cadence = cadence.ok_or_else(|| AppError::Invalid("write a cadence".into()))?;
            let zone = if zone.is_empty() {
                "UTC".to_owned()
            } else {
                zone
            };
            let table =
                Timetable::new(&cadence, &zone).map_err(|e| AppError::Invalid(e.to_string()))?;
            Ok(table
                .upcoming(SystemClock.now(), SHOWN)
                .into_iter()
                .map(|at| wall_clock(at, &zone))
                .collect())
        }
        .await,
    )
}

/// Creates a schedule of the session's tenant, or (with `editing` naming one) changes it.
#[server(endpoint = "save_schedule")]
pub async fn save_schedule(
    editing: String,
    id: String,
    workflow: String,
    kind: String,
    expression: String,
    timezone: String,
    overlap: String,
    catchup_window: String,
    jitter: String,
    input: String,
    paused: Option<String>,
) -> Result<String, AppError> {
    crate::ssr::reply(
        async move {
            use durable::model::ScheduleId;

            use crate::ssr::{Need, SessionView};

            let view = SessionView::open(Need::Act, None).await?;
            let invalid = |e: durable::model::ScheduleError| AppError::Invalid(e.to_string());
            let mut fields = fields_of(&kind, &expression, &timezone)?;
            let text = |raw: &str| Some(raw.trim().to_owned()).filter(|t| !t.is_empty());
            fields.workflow = text(&workflow);
            fields.overlap = text(&overlap);
            fields.catchup_window = text(&catchup_window);
            fields.jitter = text(&jitter);
            fields.paused = Some(paused.is_some());
            fields.input = match input.trim() {
                "" => None,
                raw => Some(serde_json::from_str(raw).map_err(|e| {
                    AppError::Invalid(format!("the input is not valid JSON ({e}); fix it and save again"))
                })?),
            };
            if editing.is_empty() {
                fields.id = Some(id.trim().to_owned());
                let (id, spec) = fields.create().map_err(invalid)?;
                let schedule = view.create_schedule(id, spec).await?;
                tracing::info!(schedule = %schedule.id, tenant = %schedule.namespace, user = %view.user().email, "schedule created from the dashboard");
                return Ok(schedule.id.to_string());
            }
            let id = ScheduleId::parse(&editing).map_err(invalid)?;
            let patch = fields.patch().map_err(invalid)?;
            let changed = view.update_schedule(&id, &patch).await?;
            let changed = changed.ok_or_else(|| gone(&id))?;
            Ok(changed.id.to_string())
        }
        .await,
    )
}

/// Pauses, resumes, triggers or deletes one of the session tenant's schedules; what happened,
/// in words, with the run a trigger started.
#[server(endpoint = "act_on_schedule")]
pub async fn act_on_schedule(id: String, action: String) -> Result<ScheduleActed, AppError> {
    crate::ssr::reply(
        async move {
            use durable::model::{ScheduleId, SchedulePatch, TickOutcome};

            use crate::ssr::{Need, SessionView};

            let view = SessionView::open(Need::Act, None).await?;
            let id = ScheduleId::parse(&id).map_err(|e| AppError::Invalid(e.to_string()))?;
            let acted = |message: String| ScheduleActed {
                message,
                run_id: None,
            };
            match action.as_str() {
                "pause" | "resume" => {
                    let patch = SchedulePatch::pausing(action == "pause");
                    view.update_schedule(&id, &patch)
                        .await?
                        .ok_or_else(|| gone(&id))?;
                    Ok(acted(format!("{id} {}d", action)))
                }
                "delete" => {
                    if !view.delete_schedule(&id).await? {
                        return Err(gone(&id));
                    }
                    Ok(acted(format!("{id} deleted; the runs it started stay")))
                }
                "trigger" => {
                    let tick = view.trigger_schedule(&id).await?.ok_or_else(|| gone(&id))?;
                    let message = match (tick.outcome, &tick.message) {
                        (TickOutcome::Started | TickOutcome::Replaced, _) => {
                            format!("{id} fired: started a run")
                        }
                        (_, Some(why)) => format!("{id} fired, no run started: {why}"),
                        (outcome, None) => format!("{id} fired: {outcome:?}"),
                    };
                    Ok(ScheduleActed {
                        message,
                        run_id: tick.run_id.map(|r| r.to_string()),
                    })
                }
                other => Err(AppError::Invalid(format!(
                    "`{other}` is not a schedule action: pause, resume, trigger or delete"
                ))),
            }
        }
        .await,
    )
}

/// What a schedule action did.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ScheduleActed {
    /// In words.
    pub message: String,
    /// The run a trigger started.
    pub run_id: Option<String>,
}

/// The form's cadence and zone as [`durable::model::ScheduleFields`].
#[cfg(feature = "ssr")]
fn fields_of(
    kind: &str,
    expression: &str,
    timezone: &str,
) -> Result<durable::model::ScheduleFields, AppError> {
    let expression = expression.trim().to_owned();
    let mut fields = durable::model::ScheduleFields {
        timezone: Some(timezone.trim().to_owned()).filter(|t| !t.is_empty()),
        ..Default::default()
    };
    match kind {
        "cron" => fields.cron = Some(expression),
        "every" => fields.every = Some(expression),
        other => {
            return Err(AppError::Invalid(format!(
                "`{other}` is not a cadence: choose cron or every"
            )));
        }
    }
    Ok(fields)
}

#[cfg(feature = "ssr")]
fn gone(id: &durable::model::ScheduleId) -> AppError {
    AppError::Invalid(format!(
        "your tenant has no schedule `{id}` (deleted meanwhile?); reload the list"
    ))
}
