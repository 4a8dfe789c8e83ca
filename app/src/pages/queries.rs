//! The query box on a run's page: ask one of the workflow's queries, or (admins and operators)
//! send it an update, and read the answer in place. The run is looked up through the session's
//! scope, so another tenant's run answers exactly like a missing one, whatever the form says.

use leptos::prelude::*;

use crate::AppError;

/// Asks run `id` query `name` (`kind` = `query`) or sends it update `name` (`kind` =
/// `update`), with `argument` (JSON; empty means `null`): the answer, pretty-printed.
#[server(endpoint = "ask_run")]
pub async fn ask_run(
    id: String,
    kind: String,
    name: String,
    argument: Option<String>,
) -> Result<String, AppError> {
    crate::ssr::reply(
        async move {
            use durable::UpdateOutcome;
            use durable::model::RunId;
            use serde_json::Value;

            use crate::ssr::{Need, SessionView};

            let need = match kind.as_str() {
                "query" => Need::Read,
                "update" => Need::Act,
                other => {
                    return Err(AppError::Invalid(format!(
                        "`{other}` is neither `query` nor `update`"
                    )));
                }
            };
            // The session's scope, never the form's.
            let view = SessionView::open(need, None).await?;
            let id = RunId::parse(&id).map_err(|e| AppError::Invalid(e.to_string()))?;
            let name = name.trim();
            if name.is_empty() {
                return Err(AppError::Invalid(format!(
                    "name the {kind} to send (for example `state`)"
                )));
            }
            let argument = match argument.filter(|a| !a.trim().is_empty()) {
                None => Value::Null,
                Some(raw) => serde_json::from_str(&raw).map_err(|e| {
                    AppError::Invalid(format!(
                        "the argument is not valid JSON ({e}); fix it and try again"
                    ))
                })?,
            };
            let not_found = || AppError::Invalid(format!("no run {id} is visible to you"));
            let answer = if need == Need::Read {
                view.query(&id, name, argument).await?.ok_or_else(not_found)?
            } else {
                match view.update(&id, name, argument).await? {
                    UpdateOutcome::Replied(reply) => {
                        tracing::info!(run_id = %id, update = name, user = %view.user().email, "update from the dashboard");
                        reply
                    }
                    UpdateOutcome::NotFound => return Err(not_found()),
                    UpdateOutcome::RunFinished(run) => {
                        return Err(AppError::Invalid(format!(
                            "the run already ended ({}); a finished run takes no updates",
                            run.status
                        )));
                    }
                }
            };
            serde_json::to_string_pretty(&answer).map_err(crate::ssr::internal)
        }
        .await,
    )
}

/// What the box holds, kept by the run's page: the page re-renders its body whenever the run
/// changes (an accepted update changes it at once), and the answer and the fields outlive that.
#[derive(Clone, Copy)]
pub struct QueryDraft {
    ask: ServerAction<AskRun>,
    kind: RwSignal<String>,
    name: RwSignal<String>,
    argument: RwSignal<String>,
}

impl QueryDraft {
    /// An empty box asking a query.
    pub fn new() -> Self {
        QueryDraft {
            ask: ServerAction::new(),
            kind: RwSignal::new("query".to_owned()),
            name: RwSignal::new(String::new()),
            argument: RwSignal::new(String::new()),
        }
    }

    /// Empties the box, for another run.
    pub fn clear(&self) {
        self.ask.value().set(None);
        self.name.set(String::new());
        self.argument.set(String::new());
    }
}

impl Default for QueryDraft {
    fn default() -> Self {
        Self::new()
    }
}

/// The box: a name, an optional JSON argument, query or update, and the answer below.
#[component]
pub fn QueryBox(id: String, can_act: bool, draft: QueryDraft) -> impl IntoView {
    let QueryDraft {
        ask,
        kind,
        name,
        argument,
    } = draft;
    let answer = move || ask.value().get();
    let field = "rounded-md border border-slate-300 px-2 py-1.5 font-mono text-sm focus:outline-none focus:ring-2 focus:ring-indigo-500";
    view! {
        <section class="rounded-lg border border-slate-200 bg-white p-4" aria-label="Query" data-testid="query-box">
            <h2 class="text-sm font-semibold">"Query"</h2>
            <p class="mt-1 text-xs text-slate-500">
                "Ask the workflow a query it registers (answered from the run's state; nothing changes)"
                {can_act.then_some(", or send it an update (its handler checks it, then the run receives it)")}
                "."
            </p>
            <ActionForm action=ask>
                <input type="hidden" name="id" value=id />
                <div class="mt-3 flex flex-wrap items-end gap-2">
                    {can_act.then(|| view! {
                        <label class="flex flex-col gap-1 text-xs font-medium text-slate-600">
                            "Kind"
                            <select
                                class=field
                                name="kind"
                                prop:value=move || kind.get()
                                on:change=move |ev| kind.set(event_target_value(&ev))
                                data-testid="query-kind"
                            >
                                <option value="query">"query"</option>
                                <option value="update">"update"</option>
                            </select>
                        </label>
                    })}
                    {(!can_act).then(|| view! { <input type="hidden" name="kind" value="query" /> })}
                    <label class="flex flex-col gap-1 text-xs font-medium text-slate-600">
                        "Name"
                        <input
                            class=field
                            name="name"
                            placeholder="state"
                            required
                            prop:value=move || name.get()
                            on:input=move |ev| name.set(event_target_value(&ev))
                            data-testid="query-name"
                        />
                    </label>
                    <label class="flex min-w-64 flex-1 flex-col gap-1 text-xs font-medium text-slate-600">
                        "Argument (JSON, optional)"
                        <input
                            class=field
                            name="argument"
                            placeholder="null"
                            prop:value=move || argument.get()
                            on:input=move |ev| argument.set(event_target_value(&ev))
                            data-testid="query-argument"
                        />
                    </label>
                    <button
                        type="submit"
                        class="rounded-md bg-slate-800 px-3 py-1.5 text-sm font-medium text-white hover:bg-slate-900 focus:outline-none focus:ring-2 focus:ring-indigo-500 focus:ring-offset-2 disabled:opacity-60"
                        disabled=move || ask.pending().get()
                        data-testid="query-send"
                    >
                        "Ask"
                    </button>
                </div>
            </ActionForm>
            <div aria-live="polite">
                {move || match answer() {
                    None => None,
                    Some(Ok(text)) => Some(view! {
                        <pre class="mt-3 overflow-x-auto rounded-md bg-slate-50 p-2 font-mono text-xs" data-testid="query-result">{text}</pre>
                    }.into_any()),
                    Some(Err(e)) => Some(view! {
                        <p class="mt-3 text-sm text-red-700" role="alert" data-testid="query-error">{e.to_string()}</p>
                    }.into_any()),
                }}
            </div>
        </section>
    }
}
