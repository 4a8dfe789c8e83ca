//! The list of schedules: cadence and zone, next fire times, last tick with its run, and the
//! row's actions.

use durable::model::{Cadence, TickOutcome};
use leptos::prelude::*;

use super::api::ActOnSchedule;
use super::form::FormState;
use crate::ShownSchedule;
use crate::components::time::utc;

/// The table, or what to do when there is nothing in it.
#[component]
pub fn ScheduleTable(
    list: Vec<ShownSchedule>,
    can_act: bool,
    act: ServerAction<ActOnSchedule>,
    form: FormState,
) -> impl IntoView {
    if list.is_empty() {
        return view! {
            <p class="mt-4 rounded-lg border border-dashed border-slate-300 p-6 text-sm text-slate-600" data-testid="schedules-empty">
                "No schedules yet. "
                {if can_act {
                    "Create one above: a cron expression such as 0 9 * * MON-FRI, or an interval such as 15m."
                } else {
                    "An admin of your tenant can create one."
                }}
            </p>
        }
        .into_any();
    }
    let rows = list
        .into_iter()
        .map(|shown| view! { <Row shown can_act act form /> })
        .collect_view();
    view! {
        <table class="mt-4 w-full rounded-lg border border-slate-200 bg-white text-sm">
            <thead class="text-left text-slate-500">
                <tr>
                    <th class="px-3 py-2">"Schedule"</th>
                    <th class="px-3 py-2">"Cadence"</th>
                    <th class="px-3 py-2">"Next fire times"</th>
                    <th class="px-3 py-2">"Last tick"</th>
                    <th class="px-3 py-2"></th>
                </tr>
            </thead>
            <tbody>{rows}</tbody>
        </table>
    }
    .into_any()
}

#[component]
fn Row(
    shown: ShownSchedule,
    can_act: bool,
    act: ServerAction<ActOnSchedule>,
    form: FormState,
) -> impl IntoView {
    let ShownSchedule { schedule, next } = shown;
    let id = schedule.id.to_string();
    let spec = &schedule.spec;
    let cadence = match &spec.cadence {
        Cadence::Cron(expr) => format!("cron {expr}"),
        Cadence::Every(every) => format!("every {every}"),
    };
    let runs_href = format!("/?attr=schedule%3D{id}");
    let paused = spec.paused;
    let next_view = if paused {
        view! { <span class="text-amber-700" data-testid="schedule-paused">"paused"</span> }
            .into_any()
    } else if next.is_empty() {
        view! { <span class="text-slate-500">"none: the expression has no more dates"</span> }
            .into_any()
    } else {
        view! {
            <ol class="font-mono text-xs" data-testid="schedule-next">
                {next.into_iter().map(|t| view! { <li>{t}</li> }).collect_view()}
            </ol>
        }
        .into_any()
    };
    let last = schedule.last.clone().map(|last| {
        let outcome = match last.outcome {
            TickOutcome::Started => "started",
            TickOutcome::Replaced => "replaced the previous run",
            TickOutcome::Skipped => "skipped",
            TickOutcome::Buffered => "waiting for the previous run",
            TickOutcome::Missed => "missed",
            TickOutcome::Refused => "refused",
        };
        let run = last.run_id.map(|run| {
            let href = format!("/runs/{run}");
            view! { <a class="block truncate font-mono text-xs text-indigo-700 hover:underline" href=href>{run.to_string()}</a> }
        });
        view! {
            <div data-testid="schedule-last">
                <span class="font-medium">{outcome}</span>
                <span class="text-slate-500">" · " {utc(last.tick)} " UTC"</span>
                {run}
                {last.message.map(|m| view! { <p class="text-xs text-slate-500">{m}</p> })}
            </div>
        }
    });
    let missed = (schedule.missed > 0).then(|| {
        view! { <p class="text-xs text-amber-700">{format!("{} missed in all", schedule.missed)}</p> }
    });
    let actions = can_act.then(|| {
        let button = |action: &'static str, label: &'static str, testid: &'static str| {
            let id = id.clone();
            view! {
                <ActionForm action=act>
                    <input type="hidden" name="id" value=id />
                    <input type="hidden" name="action" value=action />
                    <button type="submit" class="text-indigo-700 hover:underline focus:outline-none focus:ring-2 focus:ring-indigo-500" data-testid=testid>
                        {label}
                    </button>
                </ActionForm>
            }
        };
        let edit = schedule.clone();
        view! {
            <div class="flex flex-wrap justify-end gap-3">
                {button("trigger", "Trigger now", "schedule-trigger")}
                {if paused {
                    button("resume", "Resume", "schedule-resume")
                } else {
                    button("pause", "Pause", "schedule-pause")
                }}
                <button type="button" class="text-indigo-700 hover:underline" on:click=move |_| form.load(&edit) data-testid="schedule-edit">
                    "Edit"
                </button>
                {button("delete", "Delete", "schedule-delete")}
            </div>
        }
    });
    view! {
        <tr class="border-t border-slate-100 align-top" data-testid="schedule-row" data-schedule-id=id.clone()>
            <td class="px-3 py-2">
                <p class="font-medium">{id.clone()}</p>
                <p class="text-xs text-slate-500">{spec.workflow.clone()}</p>
                <a class="text-xs text-indigo-700 hover:underline" href=runs_href data-testid="schedule-runs">"its runs"</a>
            </td>
            <td class="px-3 py-2">
                <p class="font-mono text-xs">{cadence}</p>
                <p class="text-xs text-slate-500">{spec.timezone.clone()} " · " {spec.overlap.as_str()}</p>
            </td>
            <td class="px-3 py-2">{next_view}</td>
            <td class="px-3 py-2">{last}{missed}</td>
            <td class="px-3 py-2">{actions}</td>
        </tr>
    }
}
