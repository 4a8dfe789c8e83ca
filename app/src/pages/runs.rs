use durable::model::Run;
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

use crate::components::live::Live;
use crate::components::status::{StatusBadge, status_classes};
use crate::components::time::utc;
use crate::{AppError, Me, RunsView};

/// A page of the session tenant's runs (every namespace for an operator), with facet counts.
#[server]
pub async fn list_runs(
    status: Option<String>,
    workflow: Option<String>,
    after: Option<String>,
) -> Result<(Me, RunsView), AppError> {
    crate::ssr::reply(
        async move {
            use durable::model::{Cursor, RunQuery, RunStatus};

            use crate::ssr::{app_state, internal, me, reads_for, session_user};

            let state = app_state()?;
            let user = session_user().await?;
            let reads = reads_for(&state, &user)?;
            let nonempty = |s: Option<String>| s.filter(|s| !s.trim().is_empty());
            let status = nonempty(status)
                .map(|s| s.parse::<RunStatus>())
                .transpose()
                .map_err(|e| AppError::Invalid(e.to_string()))?;
            let cursor = nonempty(after)
                .map(|c| Cursor::parse(&c))
                .transpose()
                .map_err(|e| AppError::Invalid(e.to_string()))?;
            let query = RunQuery {
                status,
                workflow: nonempty(workflow),
                limit: 50,
                cursor,
                ..RunQuery::default()
            };
            let page = reads.list_runs(&query).await.map_err(internal)?;
            let counts = reads.count_by_status().await.map_err(internal)?;
            let workflows = state.engine.registry().workflow_names();
            Ok((
                me(&user),
                RunsView {
                    page,
                    counts,
                    workflows,
                },
            ))
        }
        .await,
    )
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
        |(q, _)| list_runs(q.get("status"), q.get("workflow"), q.get("after")),
    );
    view! {
        <Title text="Runs · durable" />
        <Transition fallback=|| view! { <p class="text-slate-500">"Loading runs…"</p> }>
            {move || {
                runs.get()
                    .map(|r| match r {
                        Ok((me, view)) => view! { <RunsBody me view /> }.into_any(),
                        Err(e) => view! { <ErrorBox error=e /> }.into_any(),
                    })
            }}
        </Transition>
    }
}

#[component]
fn RunsBody(me: Me, view: RunsView) -> impl IntoView {
    let query = use_query_map();
    let current_status = move || query.with(|q| q.get("status")).unwrap_or_default();
    let total: u64 = view.counts.iter().map(|c| c.count).sum();
    let operator = me.is_operator();
    let can_act = me.role.can_act();
    let workflows = view.workflows.clone();
    let next = view.page.next_cursor.clone().map(|c| {
        let status = query
            .with_untracked(|q| q.get("status"))
            .unwrap_or_default();
        format!("/?status={status}&after={}", String::from(c))
    });
    let runs = view.page.runs;
    let empty = runs.is_empty();
    view! {
        <div class="flex flex-col gap-6">
            <section class="flex flex-wrap items-center gap-2" aria-label="Filter by status">
                <a
                    href="/"
                    class=move || chip_class(current_status().is_empty(), "bg-white text-slate-800")
                    data-testid="chip-all"
                >
                    "all "
                    <span class="font-semibold">{total}</span>
                </a>
                {view
                    .counts
                    .into_iter()
                    .map(|c| {
                        let s = c.status.as_str();
                        let colors = status_classes(c.status);
                        let href = format!("/?status={s}");
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
            <Show when=move || can_act>
                <StartRunForm workflows=workflows.clone() />
            </Show>
            <section aria-label="Runs">
                <Show
                    when=move || !empty
                    fallback=|| {
                        view! {
                            <div
                                class="rounded-lg border border-dashed border-slate-300 bg-white p-8 text-center text-slate-600"
                                data-testid="runs-empty"
                            >
                                "No runs here yet. Start one above, or through the API (POST /api/v1/runs)."
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
