//! Acting on a run from its detail page: cancel, signal, retry, retry with edited input (with a
//! live diff against the original), continue a blocked run, and redispatch waiting steps.
//! Only admins and operators may act. The run is looked up through the session's scope, so
//! another tenant's run answers exactly like a missing one, whatever the form says.

use durable::model::{Run, RunStatus};
use leptos::prelude::*;
use serde_json::Value;

use crate::AppError;
use crate::components::diff::{Change, json_changes};

/// Carries out `verb` on run `id` and opens the run it leaves the user on (the new run, for a
/// retry with input). `name` and `payload` are the signal's; `payload` is the new input for
/// `retry-with-input`.
#[server(endpoint = "act_on_run")]
pub async fn act_on_run(
    id: String,
    verb: String,
    name: Option<String>,
    payload: Option<String>,
) -> Result<(), AppError> {
    crate::ssr::reply(
        async move {
            use durable::Control;
            use durable::model::RunId;
            use durable::store::SignalSent;
            use serde_json::Value;

            use crate::ssr::{Need, SessionView};

            // The session's scope, never the form's.
            let view = SessionView::open(Need::Act, None).await?;
            let id = RunId::parse(&id).map_err(|e| AppError::Invalid(e.to_string()))?;
            let json = |raw: Option<String>, what: &str| -> Result<Value, AppError> {
                match raw.filter(|r| !r.trim().is_empty()) {
                    None => Ok(Value::Null),
                    Some(raw) => serde_json::from_str(&raw).map_err(|e| {
                        AppError::Invalid(format!(
                            "the {what} is not valid JSON ({e}); fix it and try again"
                        ))
                    }),
                }
            };
            let not_found = || AppError::Invalid(format!("no run {id} is visible to you"));
            let outcome = |verb: &str, control: Control| match control {
                Control::Done(run) => Ok(run.id),
                Control::NotFound => Err(not_found()),
                Control::WrongStatus(run) => Err(AppError::Invalid(format!(
                    "the run is {}; it cannot be {verb} now",
                    run.status
                ))),
            };
            let open = match verb.as_str() {
                "cancel" if payload.as_deref() == Some("compensate") => {
                    outcome("cancelled", view.cancel_compensating(&id).await?)?
                }
                "cancel" => outcome("cancelled", view.cancel(&id).await?)?,
                "retry" => outcome("retried", view.retry(&id).await?)?,
                "continue" => outcome(
                    "continued (only a blocked run can be)",
                    view.continue_run(&id).await?,
                )?,
                "redispatch" => match view.redispatch(&id).await? {
                    (Control::Done(run), n) => {
                        tracing::info!(run_id = %id, steps = n, user = %view.user().email, "redispatched from the dashboard");
                        leptos_axum::redirect(&format!("/runs/{}?redispatched={n}", run.id));
                        return Ok(());
                    }
                    (Control::NotFound, _) => return Err(not_found()),
                    (Control::WrongStatus(run), _) => {
                        return Err(AppError::Invalid(format!(
                            "the run is {} and waits on no remote step; there is nothing to redispatch",
                            run.status
                        )));
                    }
                },
                "retry-with-input" => {
                    let input = json(payload, "input")?;
                    outcome("retried", view.retry_with_input(&id, input).await?)?
                }
                "signal" => {
                    let name = name
                        .map(|n| n.trim().to_owned())
                        .filter(|n| !n.is_empty())
                        .ok_or_else(|| {
                            AppError::Invalid(
                                "name the signal to send (for example `approve`)".into(),
                            )
                        })?;
                    let payload = json(payload, "payload")?;
                    match view.signal(&id, &name, payload).await? {
                        SignalSent::Delivered(run) => run.id,
                        SignalSent::NotFound => return Err(not_found()),
                        SignalSent::RunFinished(run) => {
                            return Err(AppError::Invalid(format!(
                                "the run already ended ({}); a finished run takes no signals",
                                run.status
                            )));
                        }
                    }
                }
                other => return Err(AppError::Invalid(format!("unknown action `{other}`"))),
            };
            tracing::info!(run_id = %id, verb, user = %view.user().email, "run action from the dashboard");
            leptos_axum::redirect(&format!("/runs/{open}"));
            Ok(())
        }
        .await,
    )
}

/// The actions that apply to `run`, each a form that works before the wasm loads.
/// `redispatchable` says whether it has a remote step waiting for a result.
#[component]
pub fn ActionsPanel(run: Run, redispatchable: bool) -> impl IntoView {
    let act = ServerAction::<ActOnRun>::new();
    let error = move || {
        act.value()
            .get()
            .and_then(|r| r.err())
            .map(|e| e.to_string())
    };
    // While one action is on its way, the buttons wait: a second click would act twice (a
    // retry with input would start two runs).
    let busy = move || act.pending().get();
    let id = run.id.to_string();
    let (id_signal, id_cancel, id_retry) = (id.clone(), id.clone(), id.clone());
    let (id_continue, id_redispatch, id_edit) = (id.clone(), id.clone(), id);
    let live = !run.status.is_terminal();
    let blocked = run.status == RunStatus::Blocked;
    let redispatchable =
        redispatchable && matches!(run.status, RunStatus::Suspended | RunStatus::Running);
    let retryable = matches!(run.status, RunStatus::Failed | RunStatus::Dead);
    let editable = matches!(
        run.status,
        RunStatus::Failed | RunStatus::Dead | RunStatus::Cancelled | RunStatus::Completed
    );
    let original = run.input.clone();
    let button = "rounded-md px-3 py-1.5 text-sm font-medium focus:outline-none focus:ring-2 focus:ring-indigo-500 focus:ring-offset-2 disabled:opacity-60";
    let field = "rounded-md border border-slate-300 px-2 py-1.5 font-mono text-sm focus:outline-none focus:ring-2 focus:ring-indigo-500";
    view! {
        <section class="rounded-lg border border-slate-200 bg-white p-4" aria-label="Actions" data-testid="actions">
            <h2 class="text-sm font-semibold">"Actions"</h2>
            <div class="mt-3 flex flex-col gap-4">
                {live.then(|| view! {
                    <ActionForm action=act>
                        <input type="hidden" name="id" value=id_signal.clone() />
                        <input type="hidden" name="verb" value="signal" />
                        <div class="flex flex-wrap items-end gap-2">
                            <label class="flex flex-col gap-1 text-xs font-medium text-slate-600">
                                "Signal name"
                                <input class=field name="name" placeholder="approve" required />
                            </label>
                            <label class="flex flex-col gap-1 text-xs font-medium text-slate-600">
                                "Signal payload (JSON)"
                                <input class=field name="payload" placeholder="{}" />
                            </label>
                            <button type="submit" class=format!("{button} bg-indigo-700 text-white hover:bg-indigo-800") disabled=busy>
                                "Send signal"
                            </button>
                        </div>
                    </ActionForm>
                    <details class="text-sm">
                        <summary class="cursor-pointer text-red-700">"Cancel this run…"</summary>
                        <ActionForm action=act>
                            <input type="hidden" name="id" value=id_cancel.clone() />
                            <input type="hidden" name="verb" value="cancel" />
                            <p class="mt-2 text-slate-600">
                                "Cancelling ends the run; steps in flight are told to stop and their results are dropped."
                            </p>
                            <label class="mt-2 flex items-center gap-2 text-slate-700">
                                <input type="checkbox" name="payload" value="compensate" data-testid="cancel-compensate" />
                                "Compensate: undo its completed steps first (newest first), with the steps they registered"
                            </label>
                            <button type="submit" class=format!("{button} mt-2 bg-red-700 text-white hover:bg-red-800") data-testid="cancel-confirm" disabled=busy>
                                "Yes, cancel it"
                            </button>
                        </ActionForm>
                    </details>
                })}
                {retryable.then(|| view! {
                    <ActionForm action=act>
                        <input type="hidden" name="id" value=id_retry.clone() />
                        <input type="hidden" name="verb" value="retry" />
                        <button type="submit" class=format!("{button} bg-slate-800 text-white hover:bg-slate-900") disabled=busy>
                            "Retry from the last good checkpoint"
                        </button>
                    </ActionForm>
                })}
                {blocked.then(|| view! {
                    <ActionForm action=act>
                        <input type="hidden" name="id" value=id_continue.clone() />
                        <input type="hidden" name="verb" value="continue" />
                        <p class="mb-2 text-sm text-slate-600">
                            "Continue drives the run again now, after its cause is fixed (a worker serving its version started, a quota was raised). If the cause remains, it parks again with the reason."
                        </p>
                        <button type="submit" class=format!("{button} bg-slate-800 text-white hover:bg-slate-900") data-testid="continue" disabled=busy>
                            "Continue"
                        </button>
                    </ActionForm>
                })}
                {redispatchable.then(|| view! {
                    <ActionForm action=act>
                        <input type="hidden" name="id" value=id_redispatch.clone() />
                        <input type="hidden" name="verb" value="redispatch" />
                        <button type="submit" class=format!("{button} border border-slate-300 text-slate-800 hover:bg-slate-100") data-testid="redispatch" title="Send its waiting remote steps again now, with the same step ids" disabled=busy>
                            "Redispatch waiting steps"
                        </button>
                    </ActionForm>
                })}
                {editable.then(|| view! { <RetryWithInput action=act id=id_edit.clone() original=original.clone() /> })}
                <Show when=move || error().is_some()>
                    <p class="text-sm text-red-700" role="alert" data-testid="action-error">{error}</p>
                </Show>
            </div>
        </section>
    }
}

/// The retry-with-input form: prefilled with the original input, checked as the user types,
/// and showing what the edit changes before it is submitted. Without wasm it is a plain form
/// the server checks.
#[component]
fn RetryWithInput(action: ServerAction<ActOnRun>, id: String, original: Value) -> impl IntoView {
    let pretty = serde_json::to_string_pretty(&original).unwrap_or_else(|_| "null".into());
    let (text, set_text) = signal(pretty.clone());
    let parsed = Memo::new(move |_| {
        text.with(|t| serde_json::from_str::<Value>(t).map_err(|e| e.to_string()))
    });
    let changes = Memo::new(move |_| {
        parsed.with(|p| {
            p.as_ref()
                .map(|v| json_changes(&original, v))
                .unwrap_or_default()
        })
    });
    let invalid =
        move || parsed.with(|p| p.as_ref().err().map(|e| format!("Not valid JSON yet: {e}")));
    let field = "rounded-md border border-slate-300 px-2 py-1.5 font-mono text-sm focus:outline-none focus:ring-2 focus:ring-indigo-500";
    view! {
        <ActionForm action>
            <input type="hidden" name="id" value=id />
            <input type="hidden" name="verb" value="retry-with-input" />
            <label class="flex flex-col gap-1 text-xs font-medium text-slate-600">
                "Retry with this input (JSON; starts a new run linked to this one)"
                <textarea
                    class=field
                    name="payload"
                    rows="6"
                    spellcheck="false"
                    aria-describedby="retry-input-check"
                    // The property, not only the text child: a textarea's text is just its
                    // initial value, and moving between runs reuses this element.
                    prop:value=move || text.get()
                    on:input=move |ev| set_text.set(event_target_value(&ev))
                    data-testid="retry-input"
                >
                    {pretty}
                </textarea>
            </label>
            <div id="retry-input-check" class="mt-2 text-xs" aria-live="polite">
                {move || match invalid() {
                    Some(message) => view! { <p class="text-red-700" data-testid="retry-input-invalid">{message}</p> }.into_any(),
                    None => view! { <ChangeList changes=changes.get() /> }.into_any(),
                }}
            </div>
            <button
                type="submit"
                class="mt-2 rounded-md bg-indigo-700 px-3 py-1.5 text-sm font-medium text-white hover:bg-indigo-800 focus:outline-none focus:ring-2 focus:ring-indigo-500 focus:ring-offset-2 disabled:opacity-60"
                disabled=move || invalid().is_some() || action.pending().get()
                data-testid="retry-with-input"
            >
                {move || match changes.with(Vec::len) {
                    0 => "Retry with the same input".to_owned(),
                    1 => "Retry with 1 change".to_owned(),
                    n => format!("Retry with {n} changes"),
                }}
            </button>
        </ActionForm>
    }
}

/// The changes an edit makes, one line per path.
#[component]
fn ChangeList(changes: Vec<Change>) -> impl IntoView {
    if changes.is_empty() {
        return view! { <p class="text-slate-500" data-testid="retry-diff-empty">"No changes from the original input yet."</p> }.into_any();
    }
    view! {
        <ul class="rounded-md border border-slate-200 bg-slate-50 p-2 font-mono" data-testid="retry-diff" aria-label="Changes from the original input">
            {changes
                .into_iter()
                .map(|c| match c {
                    Change::Added { path, value } => view! { <li class="text-emerald-800">{format!("+ {path}: {value}")}</li> }.into_any(),
                    Change::Removed { path, value } => view! { <li class="text-red-800">{format!("- {path}: {value}")}</li> }.into_any(),
                    Change::Changed { path, before, after } => view! { <li class="text-amber-900">{format!("~ {path}: {before} → {after}")}</li> }.into_any(),
                })
                .collect_view()}
        </ul>
    }
    .into_any()
}
