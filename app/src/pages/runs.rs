use crate::data;
use durable::model::Run;
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

use crate::components::error_box::ErrorBox;
use crate::components::live::Live;
use crate::components::status::{StatusBadge, status_classes};
use crate::components::time::{ago, utc};
use crate::pages::activity::ActivityPanel;
use crate::pages::bulk::BulkPanel;
use crate::pages::filters::Filters;
use crate::pages::publish::{PublishEvent, PublishPanel};
use crate::{AppError, Me, RunsView};

/// A page of the session tenant's runs (every namespace for an operator, or the one its `ns`
/// filter names) matching the filters, with facet counts, and, when `bulk` names a verb, how
/// many of the matching runs it would act on. Every filter is a plain string from the URL,
/// checked here.
#[server]
pub async fn list_runs(
    #[server(default)] filters: Filters,
    after: Option<String>,
    bulk: Option<String>,
) -> Result<(Me, RunsView), AppError> {
    crate::ssr::reply(
        async move {
            use crate::pages::bulk::{BulkVerb, preview};
            use crate::pages::filters::run_query;
            use crate::ssr::{Need, SessionView, me};

            // The session's scope; the `ns` filter narrows it for an operator only.
            let view = SessionView::open(Need::Read, Some(&filters.ns)).await?;
            let query = run_query(&filters, after.as_deref())?;
            let page = view.list_runs(&query).await?;
            let facets = view.facets().await?;
            let workflows = view.workflow_names();
            let plan = view.own_plan().await?;
            let bulk = match bulk.as_deref().filter(|b| !b.is_empty()) {
                Some(verb) if view.user().role.can_act() => {
                    let verb = BulkVerb::parse(verb)?;
                    Some(preview(&view, &query, verb).await?)
                }
                _ => None,
            };
            Ok((
                me(view.user()),
                RunsView {
                    page,
                    facets,
                    workflows,
                    bulk,
                    plan,
                    now: {
                        use durable::runtime::{Clock, SystemClock};
                        SystemClock.now()
                    },
                },
            ))
        }
        .await,
    )
}

/// Starts a run of `workflow` with `input` (JSON) and an optional `timeout` (`30m`) in the
/// session's tenant and opens it.
#[server(endpoint = "start_run")]
pub async fn start_run(
    workflow: String,
    input: String,
    timeout: Option<String>,
) -> Result<(), AppError> {
    crate::ssr::reply(async move {
        use durable::StartRun;
        use serde_json::Value;

        use crate::ssr::{Need, SessionView};

        let view = SessionView::open(Need::Act, None).await?;
        let workflow = workflow.trim().to_owned();
        if workflow.is_empty() {
            return Err(AppError::Invalid("choose a workflow to start".into()));
        }
        let input: Value = serde_json::from_str(&input)
            .map_err(|e| AppError::Invalid(format!("the input is not valid JSON ({e}); fix it and start again")))?;
        let timeout = StartRun::parse_timeout(timeout.as_deref().unwrap_or_default())
            .map_err(crate::ssr::engine_error)?;
        // The view stamps the session's tenant, never a form field; an operator starts in
        // `default`.
        let run = view
            .start_run(StartRun {
                workflow,
                input,
                timeout,
                ..StartRun::default()
            })
            .await?;
        tracing::info!(run_id = %run.id, namespace = %run.namespace, user = %view.user().email, "run started from the dashboard");
        leptos_axum::redirect(&format!("/runs/{}", run.id));
        Ok(())
    }
    .await)
}

/// The runs list.
#[component]
pub fn RunsPage() -> impl IntoView {
    let live = expect_context::<Live>();
    let query = use_query_map();
    let runs = data::resource(
        move || (query.get(), live.version.get()),
        |(q, _)| list_runs(Filters::from_query(&q), q.get("after"), q.get("bulk")),
    );
    let publish = ServerAction::<PublishEvent>::new();
    let filters = Memo::new(move |_| query.with(Filters::from_query));
    let chart_hrefs = Signal::derive(move || {
        filters.with(|f| ["hour", "day"].map(|w| f.href_with(&[("window", w)])))
    });
    let chart_ns = Signal::derive(move || filters.with(|f| f.ns.clone()));
    view! {
        <Title text="Runs · durable" />
        <Transition fallback=|| view! { <p class="text-slate-500">"Loading runs…"</p> }>
            {move || {
                runs.get()
                    .map(|r| match r {
                        Ok((me, view)) => view! { <RunsBody me view publish /> }.into_any(),
                        Err(e) => view! { <FilterBar /> <ErrorBox error=e /> }.into_any(),
                    })
            }}
        </Transition>
        <ActivityPanel hrefs=chart_hrefs ns=chart_ns />
    }
}

/// The filter form: a plain GET form, so it works before the wasm loads and by keyboard.
#[component]
fn FilterBar(#[prop(optional)] operator: bool) -> impl IntoView {
    let query = use_query_map();
    let f = query.with_untracked(Filters::from_query);
    view! {
        <form method="get" action="/" class="flex flex-wrap items-end gap-3" aria-label="Filter runs" data-testid="filters">
            <input type="hidden" name="status" value=f.status.clone() />
            <FilterField label="Filter by workflow" name="workflow" value=f.workflow.clone() placeholder="any" />
            <FilterField label="Filter by tag" name="tag" value=f.tag.clone() placeholder="any" />
            <FilterField label="Filter by attribute" name="attr" value=f.attr.clone() placeholder="key=value" />
            <FilterField label="Created from (UTC)" name="from" value=f.from.clone() kind="date" />
            <FilterField label="Created until (UTC)" name="until" value=f.until.clone() kind="date" />
            <FilterField label="Run id (and its children)" name="id" value=f.id.clone() placeholder="any" />
            {operator.then(|| view! { <FilterField label="Namespace" name="ns" value=f.ns.clone() placeholder="every" /> })}
            <button type="submit" class="rounded-md bg-slate-800 px-3 py-1.5 text-sm font-medium text-white hover:bg-slate-900 focus:outline-none focus:ring-2 focus:ring-indigo-500 focus:ring-offset-2">
                "Filter"
            </button>
            {f.any().then(|| view! { <a class="text-sm text-indigo-700 underline" href="/">"Clear filters"</a> })}
        </form>
    }
}

/// A tenant's plan in force: what it uses of its ceilings (when the plan sets any), and how
/// long its finished runs are kept.
#[component]
fn PlanStrip(plan: crate::PlanRow) -> impl IntoView {
    let p = &plan.effective;
    let usage = plan.usage.clone().unwrap_or_default();
    let of = |used: u64, limit: Option<u32>, what: &str| {
        limit.map(|limit| format!("{used} of {limit} {what}"))
    };
    let parts: Vec<String> = [
        of(usage.running, p.max_concurrent_runs, "runs running at once"),
        of(usage.queued, p.max_queued_runs, "queued"),
        of(
            usage.started_last_minute,
            p.starts_per_minute,
            "starts in the last minute",
        ),
    ]
    .into_iter()
    .flatten()
    .collect();
    let ceilings = (!parts.is_empty()).then(|| {
        view! {
            <span class="font-medium">"Your plan: "</span>
            {parts.join(" · ")}
            ". Runs over the concurrency limit wait queued and start by themselves. "
        }
    });
    let kept = match p.retention_days {
        Some(1) => "Finished runs are kept for 1 day, then deleted.".to_owned(),
        Some(days) => format!("Finished runs are kept for {days} days, then deleted."),
        None => "Finished runs are kept until deleted: your plan sets no retention.".to_owned(),
    };
    view! {
        <p class="rounded-md border border-slate-200 bg-white px-3 py-2 text-sm text-slate-700" data-testid="plan-usage">
            {ceilings}
            <span data-testid="plan-retention">{kept}</span>
        </p>
    }
}

#[component]
fn RunsBody(me: Me, view: RunsView, publish: ServerAction<PublishEvent>) -> impl IntoView {
    let query = use_query_map();
    let filters = query.with_untracked(Filters::from_query);
    let current_status = move || query.with(|q| q.get("status")).unwrap_or_default();
    let total: u64 = view.facets.statuses.iter().map(|c| c.count).sum();
    let operator = me.is_operator();
    let can_act = me.role.can_act();
    let workflows = view.workflows.clone();
    let next = view
        .page
        .next_cursor
        .clone()
        .map(|c| filters.href(Some(&String::from(c))));
    let all_href = filters.with("status", "").href(None);
    let facet_links = |key: &'static str, counts: Vec<durable::model::ValueCount>| {
        counts
            .into_iter()
            .map(|c| {
                let value = c.value.as_str().unwrap_or_default().to_owned();
                let href = filters.with(key, &value).href(None);
                let active = filters.with(key, &value) == filters;
                view! {
                    <a href=href class=chip_class(active, "bg-white text-slate-700") data-testid=format!("facet-{key}-{value}")>
                        {value.clone()} " " <span class="font-semibold">{c.count}</span>
                    </a>
                }
            })
            .collect_view()
    };
    let workflow_facets = facet_links("workflow", view.facets.workflows.clone());
    let tag_facets = facet_links("tag", view.facets.tags.clone());
    let has_tags = !view.facets.tags.is_empty();
    let filtered = filters.any();
    let runs = view.page.runs;
    let empty = runs.is_empty();
    let bulk = view.bulk;
    let now = view.now;
    let plan = view.plan.map(|plan| view! { <PlanStrip plan /> });
    view! {
        <div class="flex flex-col gap-6">
            {plan}
            <section class="flex flex-wrap items-center gap-2" aria-label="Filter by status">
                <a
                    href=all_href
                    class=move || chip_class(current_status().is_empty(), "bg-white text-slate-800")
                    data-testid="chip-all"
                >
                    "all "
                    <span class="font-semibold">{total}</span>
                </a>
                {view
                    .facets
                    .statuses
                    .into_iter()
                    .map(|c| {
                        let s = c.status.as_str();
                        let colors = status_classes(c.status);
                        let href = filters.with("status", s).href(None);
                        view! {
                            <a
                                href=href
                                class=move || chip_class(current_status() == s, colors)
                                data-testid=format!("chip-{s}")
                            >
                                {s}
                                " "
                                <span class="font-semibold">{c.count}</span>
                            </a>
                        }
                    })
                    .collect_view()}
            </section>
            <FilterBar operator />
            <section class="flex flex-wrap items-center gap-2 text-sm" aria-label="Workflows and tags">
                <span class="text-xs font-medium uppercase tracking-wide text-slate-500">"Workflows"</span>
                {workflow_facets}
                {has_tags.then(|| view! { <span class="ml-4 text-xs font-medium uppercase tracking-wide text-slate-500">"Tags"</span> })}
                {tag_facets}
            </section>
            <Show when=move || can_act>
                <StartRunForm workflows=workflows.clone() />
            </Show>
            {(can_act && !operator).then(|| view! { <PublishPanel publish /> })}
            {can_act.then(|| view! { <BulkPanel filters=filters.clone() preview=bulk.clone() /> })}
            <section aria-label="Runs">
                <Show
                    when=move || !empty
                    fallback=move || {
                        view! {
                            <div
                                class="rounded-lg border border-dashed border-slate-300 bg-white p-8 text-center text-slate-600"
                                data-testid="runs-empty"
                            >
                                {if filtered {
                                    "No runs match these filters. Loosen one, or clear them."
                                } else {
                                    "No runs here yet. Start one above, or through the API (POST /api/v1/runs)."
                                }}
                            </div>
                        }
                    }
                >
                    <div class="overflow-x-auto rounded-lg border border-slate-200 bg-white">
                        <table class="min-w-full text-sm" data-testid="runs-table">
                            <thead class="bg-slate-100 text-left text-xs uppercase tracking-wide text-slate-600">
                                <tr>
                                    <th class="px-3 py-2">"Run"</th>
                                    {operator.then(|| view! { <th class="px-3 py-2">"Namespace"</th> })}
                                    <th class="px-3 py-2">"Workflow"</th>
                                    <th class="px-3 py-2">"Status"</th>
                                    <th class="px-3 py-2">"Created"</th>
                                </tr>
                            </thead>
                            <tbody>
                                {runs
                                    .clone()
                                    .into_iter()
                                    .map(|run| view! { <RunRow run operator now /> })
                                    .collect_view()}
                            </tbody>
                        </table>
                    </div>
                </Show>
                {next
                    .map(|href| {
                        view! {
                            <a class="mt-3 inline-block text-indigo-700 underline" href=href>
                                "Older runs →"
                            </a>
                        }
                    })}
            </section>
        </div>
    }
}

/// One labelled field of the filter form.
#[component]
fn FilterField(
    label: &'static str,
    name: &'static str,
    value: String,
    #[prop(default = "text")] kind: &'static str,
    #[prop(default = "")] placeholder: &'static str,
) -> impl IntoView {
    view! {
        <label class="flex flex-col gap-1 text-xs font-medium text-slate-600">
            {label}
            <input
                class="rounded-md border border-slate-300 px-2 py-1.5 text-sm focus:outline-none focus:ring-2 focus:ring-indigo-500"
                type=kind
                name=name
                value=value
                placeholder=placeholder
            />
        </label>
    }
}

fn chip_class(active: bool, colors: &str) -> String {
    let ring = if active {
        "ring-2 ring-indigo-600"
    } else {
        "ring-1 ring-slate-200"
    };
    format!(
        "rounded-full px-3 py-1 text-sm {colors} {ring} hover:opacity-80 focus:outline-none focus:ring-2 focus:ring-indigo-500"
    )
}

#[component]
fn RunRow(run: Run, operator: bool, now: durable::model::Millis) -> impl IntoView {
    let href = format!("/runs/{}", run.id);
    view! {
        <tr class="border-t border-slate-100 hover:bg-slate-50" data-run-id=run.id.to_string()>
            <td class="px-3 py-2 font-mono text-xs">
                <a class="text-indigo-700 hover:underline" href=href>
                    {run.id.to_string()}
                </a>
            </td>
            {operator
                .then(|| {
                    view! {
                        <td class="px-3 py-2" data-testid="run-namespace">
                            {run.namespace.to_string()}
                        </td>
                    }
                })}
            <td class="px-3 py-2">{run.workflow.clone()} " v" {run.workflow_version}</td>
            <td class="px-3 py-2">
                <StatusBadge status=run.status />
            </td>
            <td class="px-3 py-2 text-slate-600" title=format!("{} UTC", utc(run.created_at))>
                {ago(now - run.created_at)}
            </td>
        </tr>
    }
}

#[component]
fn StartRunForm(workflows: Vec<String>) -> impl IntoView {
    let start = ServerAction::<StartRun>::new();
    let error = move || {
        start
            .value()
            .get()
            .and_then(|r| r.err())
            .map(|e| e.to_string())
    };
    view! {
        <section class="rounded-lg border border-slate-200 bg-white p-4" aria-label="Start a run">
            <h2 class="text-base font-semibold">"Start a run"</h2>
            <ActionForm action=start>
                <div class="mt-3 grid gap-3 md:grid-cols-[14rem_1fr_auto] md:items-start">
                    <div class="flex flex-col gap-1">
                        <label class="text-sm font-medium" for="workflow">
                            "Workflow"
                        </label>
                        <select
                            id="workflow"
                            name="workflow"
                            class="rounded-md border border-slate-300 px-2 py-2 focus:outline-none focus:ring-2 focus:ring-indigo-500"
                        >
                            {workflows
                                .into_iter()
                                .map(|w| view! { <option value=w.clone()>{w.clone()}</option> })
                                .collect_view()}
                        </select>
                    </div>
                    <div class="flex flex-col gap-1">
                        <label class="text-sm font-medium" for="input">
                            "Input (JSON)"
                        </label>
                        <textarea
                            id="input"
                            name="input"
                            rows="3"
                            spellcheck="false"
                            class="rounded-md border border-slate-300 px-3 py-2 font-mono text-sm focus:outline-none focus:ring-2 focus:ring-indigo-500"
                        >
                            "{}"
                        </textarea>
                        <label class="mt-1 flex items-center gap-2 text-sm text-slate-600">
                            "Timeout (optional)"
                            <input
                                name="timeout"
                                placeholder="30m"
                                size="8"
                                class="rounded-md border border-slate-300 px-2 py-1 font-mono text-sm focus:outline-none focus:ring-2 focus:ring-indigo-500"
                                data-testid="start-timeout"
                            />
                        </label>
                    </div>
                    <button
                        type="submit"
                        class="self-end rounded-md bg-indigo-700 px-4 py-2 font-medium text-white hover:bg-indigo-800 focus:outline-none focus:ring-2 focus:ring-indigo-500 focus:ring-offset-2 disabled:opacity-60"
                        disabled=move || start.pending().get()
                    >
                        {move || if start.pending().get() { "Starting…" } else { "Start run" }}
                    </button>
                </div>
                <Show when=move || error().is_some()>
                    <p class="mt-2 text-sm text-red-700" role="alert" data-testid="start-error">
                        {error}
                    </p>
                </Show>
            </ActionForm>
        </section>
    }
}
