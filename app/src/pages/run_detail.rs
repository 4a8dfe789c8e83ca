use crate::data;
use durable::model::{Checkpoint, Waiting};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_params_map;

use crate::components::error_box::ErrorBox;
use crate::components::json::JsonBlock;
use crate::components::live::Live;
use crate::components::status::StatusBadge;
use crate::components::time::{duration, utc};
use crate::components::timeline::Timeline;
use crate::components::tree::RunTree;
use crate::pages::actions::ActionsPanel;
use crate::pages::queries::{QueryBox, QueryDraft};
use crate::{AppError, Me, QuotaHold, RunView};

/// One run with its checkpoints, its family (for the child tree) and the live workers, if the
/// session may see it. A run of another tenant answers exactly like a missing one.
#[server(endpoint = "get_run_detail")]
pub async fn get_run_detail(id: String) -> Result<(Me, Option<RunView>), AppError> {
    crate::ssr::reply(
        async move {
            use durable::model::{RunDetail, RunId, RunQuery};

            use crate::ssr::{Need, SessionView, me};

            let view = SessionView::open(Need::Read, None).await?;
            let id = RunId::parse(&id).map_err(|e| AppError::Invalid(e.to_string()))?;
            let Some(run) = view.get_run(&id).await? else {
                return Ok((me(view.user()), None));
            };
            let quota = view.quota_hold(&run).await?;
            let (checkpoints, family, workers) = tokio::try_join!(
                view.checkpoints(&id),
                async {
                    let query = RunQuery {
                        family: Some(run.root_run_id.clone()),
                        limit: durable::model::MAX_PAGE_SIZE,
                        ..RunQuery::default()
                    };
                    view.list_runs(&query).await
                },
                view.live_workers(),
            )?;
            Ok((
                me(view.user()),
                Some(RunView {
                    worker_command: view.worker_command(run.namespace.as_str()),
                    detail: RunDetail { run, checkpoints },
                    family_truncated: family.next_cursor.is_some(),
                    family: family.runs,
                    workers,
                    quota,
                }),
            ))
        }
        .await,
    )
}

/// The run detail screen; re-reads the run whenever one of its events arrives.
#[component]
pub fn RunDetailPage() -> impl IntoView {
    let live = expect_context::<Live>();
    let params = use_params_map();
    let id = move || params.with(|p| p.get("id")).unwrap_or_default();
    // Counts this run's events only, so other runs' traffic does not re-read this page.
    let run_version = Memo::new(move |prev: Option<&u64>| {
        let prev = prev.copied().unwrap_or(0);
        match live.last.get() {
            Some(ev) if ev.run_id.as_str() == id() => prev + 1,
            _ => prev,
        }
    });
    let detail = data::resource(
        move || (id(), run_version.get()),
        |(id, _)| get_run_detail(id),
    );
    // The query box's answer and fields outlive the body's re-renders, not a move to another run.
    let draft = QueryDraft::new();
    Effect::watch(id, move |_, _, _| draft.clear(), false);
    let query = leptos_router::hooks::use_query_map();
    let redispatched = move || query.with(|q| q.get("redispatched"));
    view! {
        <Title text="Run · durable" />
        <a href="/" class="text-sm text-indigo-700 hover:underline">
            "← All runs"
        </a>
        {move || redispatched().map(|n| view! {
            <p class="mt-2 rounded-md bg-emerald-50 p-2 text-sm text-emerald-900" role="status" data-testid="redispatched">
                {format!("Sent {n} waiting step(s) again, with the same step ids.")}
            </p>
        })}
        <Transition fallback=|| view! { <p class="text-slate-500">"Loading run…"</p> }>
            {move || {
                detail
                    .get()
                    .map(|r| match r {
                        Ok((me, Some(view))) => view! { <DetailBody me view draft /> }.into_any(),
                        Ok((_, None)) => view! { <RunNotFound /> }.into_any(),
                        Err(e) => view! { <ErrorBox error=e /> }.into_any(),
                    })
            }}
        </Transition>
    }
}

#[component]
fn RunNotFound() -> impl IntoView {
    crate::error::respond_not_found();
    view! {
        <div
            class="mt-4 rounded-lg border border-dashed border-slate-300 bg-white p-8 text-center text-slate-600"
            data-testid="run-not-found"
        >
            "No run with this id is visible to you. Check the id, or go back to your runs."
        </div>
    }
}

/// What a queued run waits for, in words.
fn held_by(hold: &QuotaHold) -> String {
    match hold {
        QuotaHold::Tenant {
            ceiling,
            running,
            queued,
        } => format!(
            "a free slot under its tenant's concurrency ceiling: {running} of {ceiling} runs are running and {queued} wait queued; it starts by itself when one ends (an operator can raise max_concurrent_runs)"
        ),
        QuotaHold::Key {
            workflow,
            key,
            limit,
            running,
        } => {
            let of = if key.is_empty() {
                format!("runs of `{workflow}`")
            } else {
                format!("runs of `{workflow}` for key `{key}`")
            };
            format!(
                "a free slot under its workflow's concurrency limit: {running} of {limit} {of} are running; it starts by itself, in the order it came, when one ends"
            )
        }
    }
}

#[component]
fn DetailBody(me: Me, view: RunView, draft: QueryDraft) -> impl IntoView {
    let RunView {
        detail,
        family,
        family_truncated,
        workers,
        worker_command,
        quota,
    } = view;
    let waiting = detail.waiting_for();
    let no_worker_for = |w: &Waiting| match w {
        Waiting::Step { name, .. } => {
            let partition = detail.run.namespace.clone().into();
            (!workers.iter().any(|g| g.serves(name, &partition)))
                .then(|| format!("{name}@{partition}"))
        }
        _ => None,
    };
    let waiting: Vec<(String, Option<String>)> = waiting
        .iter()
        .map(|w| match (w, &quota) {
            (Waiting::Queued, Some(hold)) => (held_by(hold), None),
            _ => (describe(w), no_worker_for(w)),
        })
        .collect();
    let redispatchable = detail.checkpoints.iter().any(|c| {
        c.kind == durable::model::CheckpointKind::RemoteStep
            && c.status == durable::model::CheckpointStatus::Pending
    });
    let actions = me
        .role
        .can_act()
        .then(|| (detail.run.clone(), redispatchable));
    let run = detail.run;
    let checkpoints = detail.checkpoints;
    let has_family = family.len() > 1;
    let tree_current = run.id.clone();
    let timeline_run = run.clone();
    let timeline_cps = checkpoints.clone();
    let tags = run.tags.clone();
    let attributes: Vec<(String, String)> = run
        .search_attributes
        .iter()
        .map(|(k, v)| (k.clone(), v.to_string()))
        .collect();
    let has_labels = !tags.is_empty() || !attributes.is_empty();
    let lineage = [
        ("parent", run.parent_run_id.clone()),
        (
            "root",
            (run.root_run_id != run.id).then(|| run.root_run_id.clone()),
        ),
        ("retry of", run.retry_of.clone()),
        ("continued from", run.continued_from.clone()),
    ];
    view! {
        <div class="mt-3 flex flex-col gap-6">
            <section class="rounded-lg border border-slate-200 bg-white p-4">
                <div class="flex flex-wrap items-center gap-3">
                    <h1 class="break-all font-mono text-base font-semibold" data-testid="run-id">
                        {run.id.to_string()}
                    </h1>
                    <span data-testid="run-status">
                        <StatusBadge status=run.status />
                    </span>
                    <a
                        class="ml-auto rounded-md border border-slate-300 px-2 py-1 text-xs font-medium text-slate-700 hover:bg-slate-50 focus:outline-none focus:ring-2 focus:ring-indigo-500"
                        href=format!("/runs/{}/history.json", run.id)
                        rel="external"
                        download=format!("{}.history.json", run.id)
                        data-testid="export-history"
                    >
                        "Export history (JSON)"
                    </a>
                </div>
                <dl class="mt-3 grid grid-cols-2 gap-x-6 gap-y-1 text-sm md:grid-cols-4">
                    <Field label="Workflow" value=format!("{} v{}", run.workflow, run.workflow_version) />
                    <Field label="Namespace" value=run.namespace.to_string() />
                    <Field label="Created (UTC)" value=utc(run.created_at) />
                    <Field label="Updated (UTC)" value=utc(run.updated_at) />
                    <Field
                        label="Finished (UTC)"
                        value=run.finished_at.map(utc).unwrap_or_else(|| "—".into())
                    />
                    <Field label="Turns" value=run.attempt.to_string() />
                    {lineage
                        .into_iter()
                        .filter_map(|(label, id)| id.map(|id| (label, id)))
                        .map(|(label, id)| {
                            let href = format!("/runs/{id}");
                            view! {
                                <div>
                                    <dt class="text-slate-500">{label}</dt>
                                    <dd>
                                        <a class="break-all font-mono text-xs text-indigo-700 underline" href=href>
                                            {id.to_string()}
                                        </a>
                                    </dd>
                                </div>
                            }
                        })
                        .collect_view()}
                </dl>
            </section>
            {(!waiting.is_empty())
                .then(|| {
                    view! {
                        <section
                            class="rounded-lg border border-amber-200 bg-amber-50 p-4 text-sm text-amber-900"
                            aria-label="Why it is waiting"
                        >
                            <h2 class="font-semibold">"Waiting for"</h2>
                            <ul class="mt-1 list-disc pl-5">
                                {waiting
                                    .iter()
                                    .map(|(text, no_worker)| {
                                        view! {
                                            <li data-testid="waiting">
                                                {text.clone()}
                                                {no_worker.clone().map(|token| {
                                                    view! {
                                                        <span class="ml-1 font-semibold text-red-800" data-testid="no-worker">
                                                            {format!("— no live worker serves `{token}`; start one with `{worker_command}`")}
                                                        </span>
                                                    }
                                                })}
                                            </li>
                                        }
                                    })
                                    .collect_view()}
                            </ul>
                        </section>
                    }
                })}
            {actions.map(|(run, redispatchable)| view! { <ActionsPanel run redispatchable /> })}
            <QueryBox id=run.id.to_string() can_act=me.role.can_act() draft />
            {has_labels
                .then(|| {
                    view! {
                        <section class="rounded-lg border border-slate-200 bg-white p-4 text-sm" aria-label="Tags and search attributes">
                            <h2 class="font-semibold">"Tags and search attributes"</h2>
                            <div class="mt-2 flex flex-wrap gap-2">
                                {tags
                                    .iter()
                                    .map(|t| view! {
                                        <a class="rounded-full bg-slate-100 px-2 py-0.5 text-xs text-slate-800 hover:underline" href=format!("/?tag={}", crate::pages::filters::encode(t)) data-testid="run-tag">{t.clone()}</a>
                                    })
                                    .collect_view()}
                            </div>
                            <dl class="mt-2 grid grid-cols-[auto_1fr] gap-x-4 gap-y-1" data-testid="run-attributes">
                                {attributes
                                    .iter()
                                    .map(|(k, v)| view! {
                                        <dt class="font-mono text-xs text-slate-500">{k.clone()}</dt>
                                        <dd class="font-mono text-xs">{v.clone()}</dd>
                                    })
                                    .collect_view()}
                            </dl>
                        </section>
                    }
                })}
            <section class="grid gap-4 md:grid-cols-2">
                <div class="min-w-0">
                    <h2 class="mb-1 text-sm font-semibold">"Input"</h2>
                    <JsonBlock value=run.input.clone() testid="run-input" />
                </div>
                <div class="min-w-0">
                    <h2 class="mb-1 text-sm font-semibold">"Output"</h2>
                    {match (run.output.clone(), run.error.clone()) {
                        (Some(out), _) => view! { <JsonBlock value=out testid="run-output" /> }.into_any(),
                        (None, Some(err)) => {
                            view! {
                                <div
                                    class="rounded-md border border-red-200 bg-red-50 p-3 text-sm text-red-800"
                                    data-testid="run-error"
                                >
                                    {err.to_string()}
                                </div>
                            }
                                .into_any()
                        }
                        (None, None) => {
                            view! { <p class="text-sm text-slate-500">"Not finished yet."</p> }.into_any()
                        }
                    }}
                </div>
            </section>
            {has_family
                .then(|| {
                    view! {
                        <section aria-label="Child runs">
                            <h2 class="mb-2 text-sm font-semibold">"Run tree"</h2>
                            <RunTree family=family.clone() current=tree_current.clone() truncated=family_truncated />
                        </section>
                    }
                })}
            {(!timeline_cps.is_empty())
                .then(|| {
                    view! {
                        <section aria-label="Timeline">
                            <h2 class="mb-2 text-sm font-semibold">"Timeline"</h2>
                            <Timeline run=timeline_run.clone() checkpoints=timeline_cps.clone() />
                        </section>
                    }
                })}
            <section>
                <h2 class="mb-2 text-sm font-semibold">"Checkpoints"</h2>
                <Show
                    when={
                        let empty = checkpoints.is_empty();
                        move || !empty
                    }
                    fallback=|| view! { <p class="text-sm text-slate-500">"No checkpoints yet."</p> }
                >
                    <div class="overflow-x-auto rounded-lg border border-slate-200 bg-white">
                        <table class="min-w-full text-sm" data-testid="checkpoints">
                            <thead class="bg-slate-100 text-left text-xs uppercase tracking-wide text-slate-600">
                                <tr>
                                    <th class="px-3 py-2">"#"</th>
                                    <th class="px-3 py-2">"Kind"</th>
                                    <th class="px-3 py-2">"Name"</th>
                                    <th class="px-3 py-2">"Status"</th>
                                    <th class="px-3 py-2">"Attempts"</th>
                                    <th class="px-3 py-2">"Worker group"</th>
                                    <th class="px-3 py-2">"Queued"</th>
                                    <th class="px-3 py-2">"Ran"</th>
                                    <th class="px-3 py-2">"Result"</th>
                                </tr>
                            </thead>
                            <tbody>
                                {checkpoints
                                    .clone()
                                    .into_iter()
                                    .map(|cp| view! { <CheckpointRow cp /> })
                                    .collect_view()}
                            </tbody>
                        </table>
                    </div>
                </Show>
            </section>
        </div>
    }
}

/// A waiting reason in words, with what to do where there is something to do.
fn describe(w: &Waiting) -> String {
    let at = |t: &Option<i64>| t.map(utc).unwrap_or_else(|| "—".into());
    match w {
        Waiting::Queued => "a driver to pick it up (it is queued)".into(),
        Waiting::Blocked {
            reason,
            fix: Some(fix),
        } => format!("a worker that can take its step ({reason}); {fix}"),
        Waiting::Blocked { reason, fix: None } => {
            format!("a process that serves its version: {reason}")
        }
        Waiting::Timer { seq, due_at } => format!("timer #{seq}, due at {} UTC", at(due_at)),
        Waiting::Signal {
            name, timeout_at, ..
        } => match timeout_at {
            Some(_) => format!(
                "signal `{name}` (gives up at {} UTC); send it with POST /api/v1/runs/<id>/signal",
                at(timeout_at)
            ),
            None => format!("signal `{name}`; send it with POST /api/v1/runs/<id>/signal"),
        },
        Waiting::Step {
            name,
            group,
            since,
            attempt,
            ..
        } => format!(
            "step `{name}` (try {attempt}) on worker group `{}` since {} UTC",
            group.as_deref().unwrap_or(name),
            at(since)
        ),
        Waiting::Retry {
            name,
            due_at,
            attempt,
            ..
        } => {
            format!(
                "step `{name}` to be retried (try {attempt}) at {} UTC",
                at(due_at)
            )
        }
        Waiting::Child {
            workflow, run_id, ..
        } => match run_id {
            Some(id) => format!("child run {id} ({workflow})"),
            None => format!("a child run of {workflow}"),
        },
    }
}

#[component]
fn Field(label: &'static str, value: String) -> impl IntoView {
    view! {
        <div>
            <dt class="text-slate-500">{label}</dt>
            <dd class="text-slate-900">{value}</dd>
        </div>
    }
}

#[component]
fn CheckpointRow(cp: Checkpoint) -> impl IntoView {
    let queued = match (cp.enqueued_at, cp.started_at) {
        (Some(q), Some(s)) => duration(s - q),
        _ => "—".into(),
    };
    let ran = match (cp.started_at, cp.finished_at) {
        (Some(s), Some(f)) => duration(f - s),
        _ => "—".into(),
    };
    let result = match (&cp.output, &cp.error) {
        (_, Some(err)) => err.to_string(),
        (Some(out), None) => out.to_string(),
        (None, None) => "—".into(),
    };
    view! {
        <tr class="border-t border-slate-100" data-seq=cp.seq>
            <td class="px-3 py-2 text-slate-500">{cp.seq}</td>
            <td class="px-3 py-2">{cp.kind.as_str()}</td>
            <td class="px-3 py-2 font-mono text-xs">{cp.name.clone()}</td>
            <td class="px-3 py-2" data-testid="checkpoint-status">
                {cp.status.as_str()}
            </td>
            <td class="px-3 py-2">{cp.attempts}</td>
            <td class="px-3 py-2 font-mono text-xs">
                {cp.worker_group.clone().unwrap_or_default()}
                {cp
                    .route
                    .as_ref()
                    .map(|route| {
                        view! {
                            <span class="block font-sans text-slate-500" data-testid="checkpoint-route">
                                {route.to_string()}
                            </span>
                        }
                    })}
            </td>
            <td class="px-3 py-2">{queued}</td>
            <td class="px-3 py-2">{ran}</td>
            <td class="max-w-xs truncate px-3 py-2 font-mono text-xs" title=result.clone()>
                {result.clone()}
            </td>
        </tr>
    }
}
