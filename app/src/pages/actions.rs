//! Acting on a run from its detail page: cancel, retry, signal, and retry with edited input.
//! Only admins and operators may act. The run is looked up through the session's scope, so
//! another tenant's run answers exactly like a missing one, whatever the form says.

use durable::model::{Run, RunStatus};
use leptos::prelude::*;

use crate::AppError;

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
            use durable::driver::Control;
            use durable::model::RunId;
            use durable::store::SignalSent;
            use serde_json::Value;

            use crate::ssr::{app_state, internal, reads_for, session_user};

            let state = app_state()?;
            let user = session_user().await?;
            if !user.role.can_act() {
                return Err(AppError::Forbidden);
            }
            // The session's scope, never the form's.
            let scope = reads_for(&state, &user)?.scope().clone();
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
            let engine = &state.engine;
            let outcome = |verb: &str, control: Control| match control {
                Control::Done(run) => Ok(run.id),
                Control::NotFound => Err(not_found()),
                Control::WrongStatus(run) => Err(AppError::Invalid(format!(
                    "the run is {}; it cannot be {verb} now",
                    run.status
                ))),
            };
            let open = match verb.as_str() {
                "cancel" => outcome(
                    "cancelled",
                    engine.cancel(&scope, &id).await.map_err(internal)?,
                )?,
                "retry" => outcome(
                    "retried",
                    engine.retry(&scope, &id).await.map_err(internal)?,
                )?,
                "retry-with-input" => {
                    let input = json(payload, "input")?;
                    outcome(
                        "retried",
                        engine
                            .retry_with_input(&scope, &id, input)
                            .await
                            .map_err(internal)?,
                    )?
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
                    match engine
                        .signal(&scope, &id, &name, payload)
                        .await
                        .map_err(internal)?
                    {
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
            tracing::info!(run_id = %id, verb, user = %user.email, "run action from the dashboard");
            leptos_axum::redirect(&format!("/runs/{open}"));
            Ok(())
        }
        .await,
    )
}

/// The actions that apply to `run`, each a form that works before the wasm loads.
#[component]
pub fn ActionsPanel(run: Run) -> impl IntoView {
    let act = ServerAction::<ActOnRun>::new();
    let error = move || {
        act.value()
            .get()
            .and_then(|r| r.err())
            .map(|e| e.to_string())
    };
    let id = run.id.to_string();
    let (id_signal, id_cancel, id_retry, id_edit) = (id.clone(), id.clone(), id.clone(), id);
    let live = !run.status.is_terminal();
    let retryable = matches!(run.status, RunStatus::Failed | RunStatus::Dead);
    let editable = matches!(
        run.status,
        RunStatus::Failed | RunStatus::Dead | RunStatus::Cancelled | RunStatus::Completed
    );
    let input = serde_json::to_string_pretty(&run.input).unwrap_or_else(|_| "null".into());
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
                            <button type="submit" class=format!("{button} bg-indigo-700 text-white hover:bg-indigo-800")>
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
                            <button type="submit" class=format!("{button} mt-2 bg-red-700 text-white hover:bg-red-800")>
                                "Yes, cancel it"
                            </button>
                        </ActionForm>
                    </details>
                })}
                {retryable.then(|| view! {
                    <ActionForm action=act>
                        <input type="hidden" name="id" value=id_retry.clone() />
                        <input type="hidden" name="verb" value="retry" />
                        <button type="submit" class=format!("{button} bg-slate-800 text-white hover:bg-slate-900")>
                            "Retry from the last good checkpoint"
                        </button>
                    </ActionForm>
                })}
                {editable.then(|| view! {
                    <ActionForm action=act>
                        <input type="hidden" name="id" value=id_edit.clone() />
                        <input type="hidden" name="verb" value="retry-with-input" />
                        <label class="flex flex-col gap-1 text-xs font-medium text-slate-600">
                            "Retry with this input (JSON; starts a new run linked to this one)"
                            <textarea class=field name="payload" rows="4" spellcheck="false">{input.clone()}</textarea>
                        </label>
                        <button type="submit" class=format!("{button} mt-2 bg-indigo-700 text-white hover:bg-indigo-800")>
                            "Retry with edited input"
                        </button>
                    </ActionForm>
                })}
                <Show when=move || error().is_some()>
                    <p class="text-sm text-red-700" role="alert" data-testid="action-error">{error}</p>
                </Show>
            </div>
        </section>
    }
}
