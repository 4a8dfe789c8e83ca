//! Publishing an event from the runs page (a tenant's admins): the tenant is the session's,
//! never the form's. The answer says how many waiting runs it reached and which runs its
//! triggers started, with links.

use durable::model::EventOutcome;
use leptos::prelude::*;

use crate::AppError;

/// Publishes event `name` with `payload` (JSON; empty means `null`), `key` and `id` (both
/// optional) to the session's tenant.
#[server(endpoint = "publish_event")]
pub async fn publish_event(
    name: String,
    payload: Option<String>,
    key: Option<String>,
    id: Option<String>,
) -> Result<EventOutcome, AppError> {
    crate::ssr::reply(
        async move {
            use durable::model::{EventId, PublishedEvent};
            use serde_json::Value;

            use crate::ssr::{Need, SessionView};

            let view = SessionView::open(Need::Act, None).await?;
            let blank = |v: Option<String>| v.map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
            let payload = match blank(payload) {
                None => Value::Null,
                Some(raw) => serde_json::from_str(&raw).map_err(|e| {
                    AppError::Invalid(format!(
                        "the payload is not valid JSON ({e}); fix it and try again"
                    ))
                })?,
            };
            let id = blank(id)
                .map(|id| EventId::parse(&id))
                .transpose()
                .map_err(|e| AppError::Invalid(e.to_string()))?;
            let event = PublishedEvent {
                name: name.trim().to_owned(),
                payload,
                key: blank(key),
                id,
            };
            let outcome = view.publish(event).await?;
            tracing::info!(event = %name.trim(), delivered = outcome.delivered, started = outcome.started.len(), user = %view.user().email, "event published from the dashboard");
            Ok(outcome)
        }
        .await,
    )
}

/// The form, folded away until opened; `publish` is the page's, so the answer outlives the
/// list's re-renders as the runs it reached move.
#[component]
pub fn PublishPanel(publish: ServerAction<PublishEvent>) -> impl IntoView {
    let field = "rounded-md border border-slate-300 px-2 py-1.5 font-mono text-sm focus:outline-none focus:ring-2 focus:ring-indigo-500";
    let label = "flex flex-col gap-1 text-xs font-medium text-slate-600";
    view! {
        // Open again after the list re-renders, once there is an answer to show.
        <details
            class="rounded-lg border border-slate-200 bg-white p-4"
            open=move || publish.value().with(Option::is_some)
            data-testid="publish-panel"
        >
            <summary class="cursor-pointer text-base font-semibold">"Publish an event…"</summary>
            <p class="mt-1 text-xs text-slate-500">
                "Runs waiting for it whose filter it passes take it; workflows it triggers start. Published again under its id, nothing new happens."
            </p>
            <ActionForm action=publish>
                <div class="mt-3 flex flex-wrap items-end gap-2">
                    <label class=label>
                        "Event name"
                        <input class=field name="name" placeholder="order.paid" required data-testid="event-name" />
                    </label>
                    <label class=format!("{label} min-w-64 flex-1")>
                        "Payload (JSON)"
                        <input class=field name="payload" placeholder="{}" data-testid="event-payload" />
                    </label>
                    <label class=label>
                        "Key (optional)"
                        <input class=field name="key" data-testid="event-key" />
                    </label>
                    <label class=label>
                        "Id (optional)"
                        <input class=field name="id" data-testid="event-id" />
                    </label>
                    <button
                        type="submit"
                        class="rounded-md bg-slate-800 px-3 py-1.5 text-sm font-medium text-white hover:bg-slate-900 focus:outline-none focus:ring-2 focus:ring-indigo-500 focus:ring-offset-2 disabled:opacity-60"
                        disabled=move || publish.pending().get()
                        data-testid="event-publish"
                    >
                        "Publish"
                    </button>
                </div>
            </ActionForm>
            <div aria-live="polite">
                {move || publish.value().get().map(|answer| match answer {
                    Ok(outcome) => view! { <Outcome outcome /> }.into_any(),
                    Err(e) => view! {
                        <p class="mt-2 text-sm text-red-700" role="alert" data-testid="event-error">{e.to_string()}</p>
                    }.into_any(),
                })}
            </div>
        </details>
    }
}

#[component]
fn Outcome(outcome: EventOutcome) -> impl IntoView {
    let reached = match outcome.delivered {
        1 => "Reached 1 waiting run".to_owned(),
        n => format!("Reached {n} waiting runs"),
    };
    let started = outcome.started;
    view! {
        <p class="mt-2 text-sm text-emerald-900" role="status" data-testid="event-outcome">
            {reached}
            {if started.is_empty() {
                "; started none.".to_owned().into_any()
            } else {
                view! {
                    "; started "
                    {started
                        .into_iter()
                        .map(|id| {
                            let href = format!("/runs/{id}");
                            view! { <a class="font-mono text-indigo-700 underline" href=href data-testid="event-started">{id.to_string()}</a> " " }
                        })
                        .collect_view()}
                }
                .into_any()
            }}
        </p>
    }
}
