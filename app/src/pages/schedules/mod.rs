//! The schedules screen: the session tenant's schedules with their next fire times and last
//! tick, a form that creates or edits one and checks its expression as it is typed, and per
//! schedule: trigger now, pause or resume, edit, delete, and its runs. The forms post without
//! the wasm too; the live check and editing need it.

mod api;
mod form;
mod table;

use crate::data;
use leptos::prelude::*;
use leptos_meta::Title;

pub use api::{ActOnSchedule, SaveSchedule, ScheduleActed, list_schedules};
use form::{FormState, ScheduleForm};
use table::ScheduleTable;

/// The schedules screen.
#[component]
pub fn SchedulesPage() -> impl IntoView {
    let save = ServerAction::<SaveSchedule>::new();
    let act = ServerAction::<ActOnSchedule>::new();
    let form = FormState::new();
    let schedules = data::resource(
        move || (save.version().get(), act.version().get()),
        |_| list_schedules(),
    );
    view! {
        <Title text="Schedules · durable" />
        <h1 class="text-xl font-semibold">"Schedules"</h1>
        <p class="mt-1 text-sm text-slate-600">
            "Start a workflow on a cron expression or at a fixed interval, in a time zone of your choice. "
            "Each tick starts one run, carrying the search attribute "
            <code>"schedule"</code>
            " = the schedule's id."
        </p>
        <Transition fallback=|| view! { <p class="mt-4 text-sm text-slate-500">"Loading schedules…"</p> }>
            {move || Suspend::new(async move {
                match schedules.await {
                    Ok(page) => {
                        let can_act = page.can_act;
                        view! {
                            <Show when=move || can_act>
                                <ScheduleForm form save workflows=page.workflows.clone() />
                            </Show>
                            <ActResult act />
                            <ScheduleTable list=page.schedules can_act act form />
                        }
                            .into_any()
                    }
                    Err(e) => {
                        view! {
                            <p class="mt-4 text-sm text-red-700" role="alert">{e.to_string()}</p>
                        }
                            .into_any()
                    }
                }
            })}
        </Transition>
    }
}

/// What the last row action did: a trigger's run, linked, or why it failed.
#[component]
fn ActResult(act: ServerAction<ActOnSchedule>) -> impl IntoView {
    move || {
        act.value().get().map(|done| match done {
            Ok(ScheduleActed { message, run_id }) => view! {
                <p class="mt-3 text-sm text-emerald-800" role="status" data-testid="schedule-acted">
                    {message}
                    {run_id
                        .map(|id| {
                            let href = format!("/runs/{id}");
                            view! {
                                " "
                                <a class="text-indigo-700 underline" href=href data-testid="schedule-run-link">
                                    {id}
                                </a>
                            }
                        })}
                </p>
            }
            .into_any(),
            Err(e) => view! {
                <p class="mt-3 text-sm text-red-700" role="alert" data-testid="schedule-act-error">
                    {e.to_string()}
                </p>
            }
            .into_any(),
        })
    }
}
