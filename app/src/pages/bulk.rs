//! Bulk cancel and retry over the runs list's current filters: a preview says how many runs the
//! action would touch (at most [`BULK_CAP`] at a time), and only a confirmed form carries it out.
//! Both steps work before the wasm loads.

use leptos::prelude::*;

use crate::pages::filters::Filters;
use crate::{AppError, BulkPreview};

/// The most runs one bulk action touches; more matching runs take another round.
#[cfg(feature = "ssr")]
pub const BULK_CAP: usize = 500;

/// What a bulk action does.
#[cfg(feature = "ssr")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BulkVerb {
    /// Cancel every matching run that is still going.
    Cancel,
    /// Retry every matching failed or dead run from its last good checkpoint.
    Retry,
}

#[cfg(feature = "ssr")]
impl BulkVerb {
    /// Reads a verb from a URL or form.
    pub fn parse(raw: &str) -> Result<Self, AppError> {
        match raw {
            "cancel" => Ok(BulkVerb::Cancel),
            "retry" => Ok(BulkVerb::Retry),
            other => Err(AppError::Invalid(format!(
                "unknown bulk action `{other}`: use cancel or retry"
            ))),
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            BulkVerb::Cancel => "cancel",
            BulkVerb::Retry => "retry",
        }
    }

    /// The statuses the verb applies to.
    fn statuses(self) -> &'static [durable::model::RunStatus] {
        use durable::model::RunStatus::*;
        match self {
            BulkVerb::Cancel => &[Pending, Running, Suspended, Blocked],
            BulkVerb::Retry => &[Failed, Dead],
        }
    }
}

/// The ids of the runs matching `query` that `verb` applies to, newest first, at most
/// `BULK_CAP + 1` (one more than the cap says "there are more"). Each applicable status is
/// listed on its own, so the store's status indexes serve every page.
#[cfg(feature = "ssr")]
async fn targets(
    view: &crate::ssr::SessionView,
    query: &durable::model::RunQuery,
    verb: BulkVerb,
) -> Result<Vec<durable::model::RunId>, AppError> {
    use durable::model::{MAX_PAGE_SIZE, RunQuery};

    let mut ids = Vec::new();
    for status in verb.statuses() {
        if query.status.is_some_and(|s| s != *status) {
            continue;
        }
        let mut page_query = RunQuery {
            status: Some(*status),
            limit: MAX_PAGE_SIZE,
            cursor: None,
            ..query.clone()
        };
        while ids.len() <= BULK_CAP {
            let page = view.list_runs(&page_query).await?;
            ids.extend(page.runs.into_iter().map(|r| r.id));
            match page.next_cursor {
                Some(cursor) => page_query.cursor = Some(cursor),
                None => break,
            }
        }
    }
    ids.truncate(BULK_CAP + 1);
    Ok(ids)
}

/// How many runs `verb` would act on under `query`.
#[cfg(feature = "ssr")]
pub async fn preview(
    view: &crate::ssr::SessionView,
    query: &durable::model::RunQuery,
    verb: BulkVerb,
) -> Result<BulkPreview, AppError> {
    let ids = targets(view, query, verb).await?;
    Ok(BulkPreview {
        verb: verb.as_str().to_owned(),
        count: ids.len().min(BULK_CAP),
        capped: ids.len() > BULK_CAP,
        cap: BULK_CAP,
    })
}

/// Carries out bulk `verb` over the runs matching the filters, at most [`BULK_CAP`] of them,
/// and returns to the list with a note of what it did. `expected` is the previewed count: if
/// the set has grown past it since, nothing is done and the user is asked to preview again.
#[server(endpoint = "bulk_act")]
pub async fn bulk_act(
    verb: String,
    #[server(default)] expected: usize,
    #[server(default)] filters: Filters,
) -> Result<(), AppError> {
    crate::ssr::reply(
        async move {
            use durable::Control;

            use crate::pages::filters::run_query;
            use crate::ssr::{Need, SessionView};

            let view = SessionView::open(Need::Act, Some(&filters.ns)).await?;
            let verb = BulkVerb::parse(&verb)?;
            let query = run_query(&filters, None)?;
            let mut ids = targets(&view, &query, verb).await?;
            ids.truncate(BULK_CAP);
            if ids.len() > expected {
                return Err(AppError::Invalid(format!(
                    "{} runs match now, more than the {expected} you confirmed; preview again to see the new count",
                    ids.len()
                )));
            }
            let (mut done, mut skipped) = (0usize, 0usize);
            for id in &ids {
                let control = match verb {
                    BulkVerb::Cancel => view.cancel(id).await?,
                    BulkVerb::Retry => view.retry(id).await?,
                };
                match control {
                    Control::Done(_) => done += 1,
                    // Finished or changed since the preview: left as it is.
                    Control::WrongStatus(_) | Control::NotFound => skipped += 1,
                }
            }
            tracing::info!(verb = verb.as_str(), done, skipped, user = %view.user().email, "bulk action from the dashboard");
            let note = format!("{}:{done}:{skipped}", verb.as_str());
            leptos_axum::redirect(&filters.href_with(&[("done", &note)]));
            Ok(())
        }
        .await,
    )
}

/// The bulk panel of the runs list: links that preview a bulk action, the preview with its
/// confirmation form, and the note of what the last one did.
#[component]
pub fn BulkPanel(filters: Filters, preview: Option<BulkPreview>) -> impl IntoView {
    let query = leptos_router::hooks::use_query_map();
    let done = query.with_untracked(|q| q.get("done")).and_then(|d| {
        let mut parts = d.splitn(3, ':');
        let verb = parts.next()?.to_owned();
        let n: usize = parts.next()?.parse().ok()?;
        let skipped: usize = parts.next()?.parse().ok()?;
        Some((verb, n, skipped))
    });
    let act = ServerAction::<BulkAct>::new();
    let error = move || {
        act.value()
            .get()
            .and_then(|r| r.err())
            .map(|e| e.to_string())
    };
    let cancel_href = filters.href_with(&[("bulk", "cancel")]);
    let retry_href = filters.href_with(&[("bulk", "retry")]);
    let back = filters.href(None);
    let scope = if filters.any() {
        "matching these filters"
    } else {
        "in this view (no filters set)"
    };
    view! {
        <section class="rounded-lg border border-slate-200 bg-white p-4 text-sm" aria-label="Bulk actions" data-testid="bulk">
            {done.map(|(verb, n, skipped)| {
                let past = if verb == "cancel" { "Cancelled" } else { "Retried" };
                view! {
                    <p class="mb-2 rounded-md bg-emerald-50 p-2 text-emerald-900" role="status" data-testid="bulk-done">
                        {format!("{past} {n} runs.")}
                        {(skipped > 0).then(|| format!(" {skipped} had changed since the preview and were left as they are."))}
                    </p>
                }
            })}
            {match preview {
                None => view! {
                    <div class="flex flex-wrap items-center gap-3">
                        <span class="font-semibold">"Bulk actions"</span>
                        <span class="text-slate-600">{format!("on every run {scope}:")}</span>
                        <a class="text-red-700 underline" href=cancel_href data-testid="bulk-cancel">"Cancel all…"</a>
                        <a class="text-indigo-700 underline" href=retry_href data-testid="bulk-retry">"Retry all failed…"</a>
                    </div>
                }.into_any(),
                Some(p) => {
                    let what = if p.verb == "cancel" { "cancel" } else { "retry" };
                    let applies = if p.verb == "cancel" { "still going (pending, running, waiting or blocked)" } else { "failed or dead" };
                    let fields = filters.pairs();
                    let nothing = p.count == 0;
                    view! {
                        <div data-testid="bulk-preview" data-count=p.count>
                            <p>
                                {if nothing {
                                    format!("No run {scope} is {applies}; there is nothing to {what}.")
                                } else {
                                    format!("This will {what} {} runs {scope} that are {applies}.", p.count)
                                }}
                                {p.capped.then(|| format!(" More match: one bulk action touches at most {} runs; run it again for the rest.", p.cap))}
                            </p>
                            <ActionForm action=act>
                                <input type="hidden" name="verb" value=p.verb.clone() />
                                <input type="hidden" name="expected" value=p.count />
                                {fields.into_iter().map(|(k, v)| view! { <input type="hidden" name=format!("filters[{k}]") value=v /> }).collect_view()}
                                <div class="mt-2 flex items-center gap-3">
                                    {(!nothing).then(|| view! {
                                        <button
                                            type="submit"
                                            class=if what == "cancel" { "rounded-md bg-red-700 px-3 py-1.5 font-medium text-white hover:bg-red-800 focus:outline-none focus:ring-2 focus:ring-indigo-500 focus:ring-offset-2" } else { "rounded-md bg-indigo-700 px-3 py-1.5 font-medium text-white hover:bg-indigo-800 focus:outline-none focus:ring-2 focus:ring-indigo-500 focus:ring-offset-2" }
                                            data-testid="bulk-confirm"
                                        >
                                            {format!("Yes, {what} {} runs", p.count)}
                                        </button>
                                    })}
                                    <a class="text-slate-700 underline" href=back.clone()>"Back"</a>
                                </div>
                            </ActionForm>
                        </div>
                    }.into_any()
                }
            }}
            <Show when=move || error().is_some()>
                <p class="mt-2 text-red-700" role="alert" data-testid="bulk-error">{error}</p>
            </Show>
        </section>
    }
}
