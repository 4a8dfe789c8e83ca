//! The form that creates a schedule or edits one: its cadence is checked on the server as it is
//! typed, with the next fire times or what is wrong shown under it.

use crate::data;
use durable::model::{Cadence, Overlap, Schedule};
use leptos::prelude::*;

use super::api::{SaveSchedule, preview_schedule};

/// Time zones offered as suggestions; any IANA name is accepted.
const ZONES: [&str; 12] = [
    "UTC",
    "Europe/London",
    "Europe/Berlin",
    "Europe/Paris",
    "America/New_York",
    "America/Chicago",
    "America/Los_Angeles",
    "America/Sao_Paulo",
    "Asia/Tokyo",
    "Asia/Kolkata",
    "Asia/Singapore",
    "Australia/Sydney",
];

/// What the form holds, so a row's "Edit" can fill it.
#[derive(Clone, Copy)]
pub struct FormState {
    /// The schedule being edited; empty when creating.
    editing: RwSignal<String>,
    id: RwSignal<String>,
    workflow: RwSignal<String>,
    kind: RwSignal<String>,
    expression: RwSignal<String>,
    timezone: RwSignal<String>,
    overlap: RwSignal<String>,
    catchup_window: RwSignal<String>,
    jitter: RwSignal<String>,
    input: RwSignal<String>,
    paused: RwSignal<bool>,
}

impl FormState {
    /// An empty form for a new schedule.
    pub fn new() -> Self {
        FormState {
            editing: RwSignal::new(String::new()),
            id: RwSignal::new(String::new()),
            workflow: RwSignal::new(String::new()),
            kind: RwSignal::new("cron".into()),
            expression: RwSignal::new(String::new()),
            timezone: RwSignal::new("UTC".into()),
            overlap: RwSignal::new(Overlap::Skip.as_str().into()),
            catchup_window: RwSignal::new("1m".into()),
            jitter: RwSignal::new("0s".into()),
            input: RwSignal::new("{}".into()),
            paused: RwSignal::new(false),
        }
    }

    /// Fills the form with `schedule`, to edit it.
    pub fn load(&self, schedule: &Schedule) {
        let spec = &schedule.spec;
        self.editing.set(schedule.id.to_string());
        self.id.set(schedule.id.to_string());
        self.workflow.set(spec.workflow.clone());
        let (kind, expression) = match &spec.cadence {
            Cadence::Cron(expr) => ("cron", expr.clone()),
            Cadence::Every(every) => ("every", every.to_string()),
        };
        self.kind.set(kind.into());
        self.expression.set(expression);
        self.timezone.set(spec.timezone.clone());
        self.overlap.set(spec.overlap.as_str().into());
        self.catchup_window.set(spec.catchup_window.to_string());
        self.jitter.set(spec.jitter.to_string());
        self.input
            .set(serde_json::to_string_pretty(&spec.input).unwrap_or_default());
        self.paused.set(spec.paused);
    }

    fn clear(&self) {
        let empty = FormState::new();
        for (field, fresh) in [
            (self.editing, empty.editing),
            (self.id, empty.id),
            (self.workflow, empty.workflow),
            (self.kind, empty.kind),
            (self.expression, empty.expression),
            (self.timezone, empty.timezone),
            (self.overlap, empty.overlap),
            (self.catchup_window, empty.catchup_window),
            (self.jitter, empty.jitter),
            (self.input, empty.input),
        ] {
            field.set(fresh.get_untracked());
        }
        self.paused.set(false);
    }
}

/// The create-or-edit form.
#[component]
pub fn ScheduleForm(
    form: FormState,
    save: ServerAction<SaveSchedule>,
    workflows: Vec<String>,
) -> impl IntoView {
    let preview = data::resource(
        move || (form.kind.get(), form.expression.get(), form.timezone.get()),
        |(kind, expression, timezone)| async move {
            if expression.trim().is_empty() {
                return None;
            }
            Some(preview_schedule(kind, expression, timezone).await)
        },
    );
    // A save that went through empties the form for the next one.
    Effect::new(move |_| {
        if matches!(save.value().get(), Some(Ok(_))) {
            form.clear();
        }
    });
    let error = move || {
        save.value()
            .get()
            .and_then(Result::err)
            .map(|e| e.to_string())
    };
    let editing = move || !form.editing.get().is_empty();
    let input_class = "mt-1 rounded-md border border-slate-300 px-2 py-1 focus:outline-none focus:ring-2 focus:ring-indigo-500";
    let placeholder = move || {
        if form.kind.get() == "every" {
            "15m"
        } else {
            "*/5 * * * *"
        }
    };
    view! {
        <section class="mt-4 rounded-lg border border-slate-200 bg-white p-4" aria-label="Create or edit a schedule">
            <h2 class="text-base font-semibold">
                {move || if editing() { format!("Edit schedule {}", form.editing.get()) } else { "New schedule".to_owned() }}
            </h2>
            <ActionForm action=save>
                <input type="hidden" name="editing" prop:value=move || form.editing.get() />
                <div class="mt-3 grid gap-3 md:grid-cols-3">
                    <label class="flex flex-col text-sm">
                        "Id"
                        <input name="id" required maxlength="100" placeholder="nightly-report" class=input_class
                            prop:value=move || form.id.get()
                            on:input=move |ev| form.id.set(event_target_value(&ev))
                            readonly=editing
                            data-testid="schedule-id" />
                    </label>
                    <label class="flex flex-col text-sm">
                        "Workflow"
                        <input name="workflow" required list="schedule-workflows" class=input_class
                            prop:value=move || form.workflow.get()
                            on:input=move |ev| form.workflow.set(event_target_value(&ev))
                            data-testid="schedule-workflow" />
                        <datalist id="schedule-workflows">
                            {workflows.into_iter().map(|w| view! { <option value=w /> }).collect_view()}
                        </datalist>
                    </label>
                    <label class="flex flex-col text-sm">
                        "Time zone"
                        <input name="timezone" required list="schedule-zones" class=input_class
                            prop:value=move || form.timezone.get()
                            on:input=move |ev| form.timezone.set(event_target_value(&ev))
                            data-testid="schedule-timezone" />
                        <datalist id="schedule-zones">
                            {ZONES.into_iter().map(|z| view! { <option value=z /> }).collect_view()}
                        </datalist>
                    </label>
                    <label class="flex flex-col text-sm">
                        "Cadence"
                        <select name="kind" class=input_class
                            prop:value=move || form.kind.get()
                            on:change=move |ev| form.kind.set(event_target_value(&ev))
                            data-testid="schedule-kind">
                            <option value="cron">"cron expression"</option>
                            <option value="every">"fixed interval"</option>
                        </select>
                    </label>
                    <label class="flex flex-col text-sm md:col-span-2">
                        {move || if form.kind.get() == "every" {
                            "Every (such as 30s, 15m, 1h30m)"
                        } else {
                            "Cron (5 fields, or 6 with seconds first)"
                        }}
                        <input name="expression" required spellcheck="false" autocomplete="off"
                            class=move || format!("{input_class} font-mono")
                            placeholder=placeholder
                            prop:value=move || form.expression.get()
                            on:input=move |ev| form.expression.set(event_target_value(&ev))
                            aria-describedby="schedule-preview-box"
                            data-testid="schedule-expression" />
                    </label>
                </div>
                <div id="schedule-preview-box" class="mt-2 text-sm" aria-live="polite">
                    <Transition fallback=|| ()>
                        {move || Suspend::new(async move {
                            match preview.await {
                                None => view! {
                                    <p class="text-slate-500">"Its next fire times show here as you type."</p>
                                }.into_any(),
                                Some(Ok(times)) => view! {
                                    <div data-testid="schedule-preview">
                                        <p class="text-slate-600">"Next fire times:"</p>
                                        <ol class="ml-5 list-decimal font-mono text-xs text-slate-800">
                                            {times.into_iter().map(|t| view! { <li data-testid="schedule-preview-time">{t}</li> }).collect_view()}
                                        </ol>
                                    </div>
                                }.into_any(),
                                Some(Err(e)) => view! {
                                    <p class="text-red-700" data-testid="schedule-preview-error">{e.to_string()}</p>
                                }.into_any(),
                            }
                        })}
                    </Transition>
                </div>
                <div class="mt-3 grid gap-3 md:grid-cols-4">
                    <label class="flex flex-col text-sm">
                        "While the previous run is going"
                        <select name="overlap" class=input_class
                            prop:value=move || form.overlap.get()
                            on:change=move |ev| form.overlap.set(event_target_value(&ev))
                            data-testid="schedule-overlap">
                            <option value="skip">"skip the tick"</option>
                            <option value="buffer_one">"buffer one tick"</option>
                            <option value="allow_all">"start anyway"</option>
                            <option value="cancel_previous">"cancel it and start"</option>
                        </select>
                    </label>
                    <label class="flex flex-col text-sm">
                        "Catch-up window"
                        <input name="catchup_window" class=input_class
                            prop:value=move || form.catchup_window.get()
                            on:input=move |ev| form.catchup_window.set(event_target_value(&ev)) />
                    </label>
                    <label class="flex flex-col text-sm">
                        "Jitter"
                        <input name="jitter" class=input_class
                            prop:value=move || form.jitter.get()
                            on:input=move |ev| form.jitter.set(event_target_value(&ev)) />
                    </label>
                    <label class="flex items-center gap-2 self-end text-sm">
                        <input type="checkbox" name="paused"
                            prop:checked=move || form.paused.get()
                            on:change=move |ev| form.paused.set(event_target_checked(&ev)) />
                        "Paused"
                    </label>
                </div>
                <label class="mt-3 flex flex-col text-sm">
                    "Input (JSON), the same for every run"
                    <textarea name="input" rows="2" spellcheck="false"
                        class=format!("{input_class} font-mono")
                        prop:value=move || form.input.get()
                        on:input=move |ev| form.input.set(event_target_value(&ev))
                        data-testid="schedule-input"></textarea>
                </label>
                <div class="mt-3 flex items-center gap-3">
                    <button type="submit"
                        class="rounded-md bg-indigo-700 px-4 py-2 text-sm font-medium text-white hover:bg-indigo-800 focus:outline-none focus:ring-2 focus:ring-indigo-500 focus:ring-offset-2 disabled:opacity-60"
                        disabled=move || save.pending().get()
                        data-testid="schedule-save">
                        {move || if editing() { "Save changes" } else { "Create schedule" }}
                    </button>
                    <Show when=editing>
                        <button type="button" class="text-sm text-slate-600 underline" on:click=move |_| form.clear()>
                            "Cancel editing"
                        </button>
                    </Show>
                </div>
                <Show when=move || error().is_some()>
                    <p class="mt-2 text-sm text-red-700" role="alert" data-testid="schedule-error">{error}</p>
                </Show>
            </ActionForm>
        </section>
    }
}
