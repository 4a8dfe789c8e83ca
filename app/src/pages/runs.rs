use durable::model::Run;
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

use crate::components::live::Live;
use crate::components::status::{StatusBadge, status_classes};
use crate::components::time::utc;
use crate::{AppError, Me, RunsView};

/// A page of the session tenant's runs (every namespace for an operator) matching the filters,
/// with facet counts. Every filter is a plain string from the URL, checked here.
#[server]
pub async fn list_runs(
    status: Option<String>,
    workflow: Option<String>,
    tag: Option<String>,
    attr: Option<String>,
    from: Option<String>,
    until: Option<String>,
    after: Option<String>,
) -> Result<(Me, RunsView), AppError> {
    crate::ssr::reply(
        async move {
            use durable::model::{AttributeFilter, Cursor, RunQuery, RunStatus};

            use crate::components::time::parse_date;
            use crate::ssr::{app_state, internal, me, reads_for, session_user};

            let state = app_state()?;
            let user = session_user().await?;
            let reads = reads_for(&state, &user)?;
            let nonempty =
                |s: Option<String>| s.map(|s| s.trim().to_owned()).filter(|s| !s.is_empty());
            let invalid = |e: &dyn std::fmt::Display| AppError::Invalid(e.to_string());
            let status = nonempty(status)
                .map(|s| s.parse::<RunStatus>())
                .transpose()
                .map_err(|e| invalid(&e))?;
            let attribute = nonempty(attr)
                .map(|raw| AttributeFilter::parse(&raw))
                .transpose()
                .map_err(|e| invalid(&e))?;
            let date = |raw: Option<String>, what: &str| {
                nonempty(raw)
                    .map(|d| {
                        parse_date(&d).ok_or_else(|| {
                            AppError::Invalid(format!("{what} `{d}` is not a date: use YYYY-MM-DD"))
                        })
                    })
                    .transpose()
            };
            let created_from = date(from, "from")?;
            // `until` is inclusive of its day.
            let created_until = date(until, "until")?.map(|ms| ms + 86_400_000);
            let cursor = nonempty(after)
                .map(|c| Cursor::parse(&c))
                .transpose()
                .map_err(|e| invalid(&e))?;
            let query = RunQuery {
                status,
                workflow: nonempty(workflow),
                tag: nonempty(tag),
                attribute,
                created_from,
                created_until,
                limit: 50,
                cursor,
            };
            let page = reads.list_runs(&query).await.map_err(internal)?;
            let facets = reads.facets().await.map_err(internal)?;
            let workflows = state.engine.registry().workflow_names();
            Ok((
                me(&user),
                RunsView {
                    page,
                    facets,
                    workflows,
                },
            ))
        }
        .await,
    )
}

/// The list's filters as they stand in the URL, so a filtered view can be shared and reloaded.
#[derive(Clone, Debug, Default, PartialEq)]
struct Filters {
    status: String,
    workflow: String,
    tag: String,
    attr: String,
    from: String,
    until: String,
}

impl Filters {
    const KEYS: [&'static str; 6] = ["status", "workflow", "tag", "attr", "from", "until"];

    fn from_query(q: &leptos_router::params::ParamsMap) -> Self {
        let get = |k: &str| q.get(k).unwrap_or_default();
        Filters {
            status: get("status"),
            workflow: get("workflow"),
            tag: get("tag"),
            attr: get("attr"),
            from: get("from"),
            until: get("until"),
        }
    }

    fn values(&self) -> [&str; 6] {
        [
            &self.status,
            &self.workflow,
            &self.tag,
            &self.attr,
            &self.from,
            &self.until,
        ]
    }

    /// These filters with `key` set to `value` (cleared when empty).
    fn with(&self, key: &str, value: &str) -> Self {
        let mut f = self.clone();
        let slot = match key {
            "status" => &mut f.status,
            "workflow" => &mut f.workflow,
            "tag" => &mut f.tag,
            "attr" => &mut f.attr,
            "from" => &mut f.from,
            _ => &mut f.until,
        };
        *slot = value.to_owned();
        f
    }

    /// The list's URL with these filters (and a page cursor).
    fn href(&self, after: Option<&str>) -> String {
        let mut parts: Vec<String> = Self::KEYS
            .iter()
            .zip(self.values())
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, v)| format!("{k}={}", encode(v)))
            .collect();
        if let Some(after) = after {
            parts.push(format!("after={}", encode(after)));
        }
        if parts.is_empty() {
            "/".to_owned()
        } else {
            format!("/?{}", parts.join("&"))
        }
    }

    fn any(&self) -> bool {
        self.values().iter().any(|v| !v.is_empty())
    }
}

/// Percent-encodes a query value.
fn encode(raw: &str) -> String {
    raw.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Starts a run of `workflow` with `input` (JSON) in the session's tenant and opens it.
#[server]
pub async fn start_run(workflow: String, input: String) -> Result<(), AppError> {
    crate::ssr::reply(async move {
        use durable::driver::{EngineError, StartRun};
        use serde_json::Value;

        use crate::ssr::{app_state, internal, session_user};

        let state = app_state()?;
        let user = session_user().await?;
        if !user.role.can_act() {
            return Err(AppError::Forbidden);
        }
        let workflow = workflow.trim().to_owned();
        if workflow.is_empty() {
            return Err(AppError::Invalid("choose a workflow to start".into()));
        }
        let input: Value = serde_json::from_str(&input)
            .map_err(|e| AppError::Invalid(format!("the input is not valid JSON ({e}); fix it and start again")))?;
        let run = state
            .engine
            .start_run(StartRun {
                workflow,
                input,
                // The session's tenant, never a form field; an operator starts in `default`.
                namespace: user.tenant.clone(),
                ..StartRun::default()
            })
            .await
            .map_err(|e| match e {
                EngineError::UnknownWorkflow(..) => AppError::Invalid(e.to_string()),
                other => internal(other),
            })?;
        tracing::info!(run_id = %run.id, namespace = %run.namespace, user = %user.email, "run started from the dashboard");
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
    let runs = Resource::new(
        move || (query.get(), live.version.get()),
        |(q, _)| {
            let get = |k: &str| q.get(k);
            list_runs(
                get("status"),
                get("workflow"),
                get("tag"),
                get("attr"),
                get("from"),
                get("until"),
                get("after"),
            )
        },
    );
    view! {
        <Title text="Runs · durable" />
        <Transition fallback=|| view! { <p class="text-slate-500">"Loading runs…"</p> }>
            {move || {
                runs.get()
                    .map(|r| match r {
                        Ok((me, view)) => view! { <RunsBody me view /> }.into_any(),
                        Err(e) => view! { <FilterBar /> <ErrorBox error=e /> }.into_any(),
                    })
            }}
        </Transition>
    }
}

/// The filter form: a plain GET form, so it works before the wasm loads and by keyboard.
#[component]
fn FilterBar() -> impl IntoView {
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
            <button type="submit" class="rounded-md bg-slate-800 px-3 py-1.5 text-sm font-medium text-white hover:bg-slate-900 focus:outline-none focus:ring-2 focus:ring-indigo-500 focus:ring-offset-2">
                "Filter"
            </button>
            {f.any().then(|| view! { <a class="text-sm text-indigo-700 underline" href="/">"Clear filters"</a> })}
        </form>
    }
}

#[component]
fn RunsBody(me: Me, view: RunsView) -> impl IntoView {
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
    view! {
        <div class="flex flex-col gap-6">
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
            <FilterBar />
            <section class="flex flex-wrap items-center gap-2 text-sm" aria-label="Workflows and tags">
                <span class="text-xs font-medium uppercase tracking-wide text-slate-500">"Workflows"</span>
                {workflow_facets}
                {has_tags.then(|| view! { <span class="ml-4 text-xs font-medium uppercase tracking-wide text-slate-500">"Tags"</span> })}
                {tag_facets}
            </section>
            <Show when=move || can_act>
                <StartRunForm workflows=workflows.clone() />
            </Show>
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
                                    <th class="px-3 py-2">"Created (UTC)"</th>
                                </tr>
                            </thead>
                            <tbody>
                                {runs
                                    .clone()
                                    .into_iter()
                                    .map(|run| view! { <RunRow run operator /> })
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
fn RunRow(run: Run, operator: bool) -> impl IntoView {
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
            <td class="px-3 py-2 text-slate-600">{utc(run.created_at)}</td>
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

/// An error from a server function, with what to do next.
#[component]
pub fn ErrorBox(error: AppError) -> impl IntoView {
    let login = matches!(error, AppError::Unauthorized);
    view! {
        <div class="rounded-lg border border-red-200 bg-red-50 p-4 text-red-800" role="alert">
            <p>{error.to_string()}</p>
            {login
                .then(|| {
                    view! {
                        <a class="mt-2 inline-block underline" href="/login">
                            "Log in"
                        </a>
                    }
                })}
        </div>
    }
}
