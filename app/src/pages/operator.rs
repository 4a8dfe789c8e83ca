//! The operator's screen: every namespace's load (backlog, running, waiting, failed in the last
//! hour) as a chart and a table, every live worker group, each namespace linking to its runs,
//! every tenant's plan, and the activity charts over every tenant.

use crate::data;
use leptos::prelude::*;
use leptos_meta::Title;

use crate::components::error_box::ErrorBox;
use crate::components::live::Live;
use crate::pages::activity::ActivityPanel;
use crate::pages::plans::{PlansSection, SavePlan};
use crate::{AppError, OperatorView};

/// The window "failed recently" counts.
#[cfg(feature = "ssr")]
const FAILED_WINDOW_MS: i64 = 3_600_000;

/// Per-namespace load and live workers, for operators only.
#[server]
pub async fn operator_overview() -> Result<OperatorView, AppError> {
    crate::ssr::reply(
        async move {
            use durable::runtime::{Clock, SystemClock};

            use crate::ssr::{Need, SessionView};

            let view = SessionView::open(Need::Operate, None).await?;
            let failed_since = SystemClock.now() - FAILED_WINDOW_MS;
            let (loads, workers) =
                tokio::try_join!(view.namespace_loads(failed_since), view.live_workers(),)?;
            let tenants: Vec<_> = loads.iter().map(|l| l.namespace.clone()).collect();
            let plans = view.plan_rows(&tenants).await?;
            Ok(OperatorView {
                backlog_chart: crate::ssr::charts::backlog_chart(&loads),
                loads,
                workers,
                failed_since,
                worker_command: view.worker_command("NAME"),
                plans,
            })
        }
        .await,
    )
}

/// The operator screen; re-reads on every live event.
#[component]
pub fn OperatorPage() -> impl IntoView {
    let live = expect_context::<Live>();
    let save = ServerAction::<SavePlan>::new();
    let overview = data::resource(
        move || (live.version.get(), save.version().get()),
        |_| operator_overview(),
    );
    view! {
        <Title text="Operator · durable" />
        <h1 class="text-lg font-semibold">"Operator view"</h1>
        <p class="text-sm text-slate-600">"Every namespace's load and the workers serving them."</p>
        <ActivityPanel hrefs=Signal::stored(["/operator?window=hour".to_owned(), "/operator?window=day".to_owned()]) />
        <Transition fallback=|| view! { <p class="text-slate-500">"Loading…"</p> }>
            {move || {
                overview.get()
                    .map(|r| match r {
                        Ok(view) => view! { <OperatorBody view save /> }.into_any(),
                        Err(e) => view! { <ErrorBox error=e /> }.into_any(),
                    })
            }}
        </Transition>
    }
}

#[component]
fn OperatorBody(view: OperatorView, save: ServerAction<SavePlan>) -> impl IntoView {
    let plans = view.plans;
    let cell = "px-3 py-2 text-right tabular-nums";
    let loads_empty = view.loads.is_empty();
    let workers_empty = view.workers.is_empty();
    let rows = view
        .loads
        .into_iter()
        .map(|l| {
            let ns = l.namespace.to_string();
            let backlog = l.backlog();
            let failed_href = format!("/?ns={ns}&status=failed");
            view! {
                <tr class="border-t border-slate-100" data-testid="load-row" data-namespace=ns.clone()>
                    <td class="px-3 py-2">
                        <a class="text-indigo-700 hover:underline" href=format!("/?ns={ns}")>{ns.clone()}</a>
                    </td>
                    <td class=cell data-testid="load-backlog">{backlog}</td>
                    <td class=cell data-testid="load-running">{l.running}</td>
                    <td class=cell>{l.suspended}</td>
                    <td class=cell>{l.blocked}</td>
                    <td class=cell data-testid="load-failed">
                        {if l.failed_recently > 0 {
                            view! { <a class="font-semibold text-red-700 hover:underline" href=failed_href>{l.failed_recently}</a> }.into_any()
                        } else {
                            view! { <span>"0"</span> }.into_any()
                        }}
                    </td>
                </tr>
            }
        })
        .collect_view();
    let workers = view
        .workers
        .into_iter()
        .map(|g| {
            let token = g.token();
            let seen = g.last_seen.map(crate::components::time::utc).unwrap_or_else(|| "in this process".into());
            view! {
                <tr class="border-t border-slate-100" data-testid="worker-row" data-token=token.clone()>
                    <td class="px-3 py-2 font-mono text-xs">{token.clone()}</td>
                    <td class=cell>{g.workers}</td>
                    <td class="px-3 py-2 text-slate-600">{seen}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <section class="mt-4 rounded-lg border border-slate-200 bg-white p-3" aria-label="Backlog per namespace">
            <div class="flex flex-wrap items-baseline justify-between gap-2">
                <h2 class="text-sm font-semibold">"Backlog per namespace"</h2>
                <span class="flex gap-3 text-xs text-slate-600">
                    <span><span class="mr-1 inline-block h-2 w-3 rounded-sm bg-amber-500"></span>"backlog (pending, blocked)"</span>
                    <span><span class="mr-1 inline-block h-2 w-3 rounded-sm bg-indigo-500"></span>"running"</span>
                    <span><span class="mr-1 inline-block h-2 w-3 rounded-sm bg-slate-400"></span>"waiting"</span>
                </span>
            </div>
            <div class="mt-2 max-w-lg" inner_html=view.backlog_chart></div>
        </section>
        <section class="mt-4" aria-label="Load per namespace">
            <h2 class="mb-2 text-sm font-semibold">"Load per namespace"</h2>
            {if loads_empty {
                view! {
                    <div class="rounded-lg border border-dashed border-slate-300 bg-white p-6 text-center text-slate-600" data-testid="loads-empty">
                        "Nothing is waiting, running or recently failed in any namespace."
                    </div>
                }
                    .into_any()
            } else {
                view! {
                    <div class="overflow-x-auto rounded-lg border border-slate-200 bg-white">
                        <table class="min-w-full text-sm" data-testid="loads">
                            <thead class="bg-slate-100 text-left text-xs uppercase tracking-wide text-slate-600">
                                <tr>
                                    <th class="px-3 py-2">"Namespace"</th>
                                    <th class="px-3 py-2 text-right" title="pending plus blocked">"Backlog"</th>
                                    <th class="px-3 py-2 text-right">"Running"</th>
                                    <th class="px-3 py-2 text-right">"Waiting"</th>
                                    <th class="px-3 py-2 text-right">"Blocked"</th>
                                    <th class="px-3 py-2 text-right">"Failed, last hour"</th>
                                </tr>
                            </thead>
                            <tbody>{rows}</tbody>
                        </table>
                    </div>
                }
                    .into_any()
            }}
        </section>
        <section class="mt-6" aria-label="Live workers">
            <h2 class="mb-2 text-sm font-semibold">"Live workers"</h2>
            {if workers_empty {
                view! {
                    <div class="rounded-lg border border-dashed border-slate-300 bg-white p-6 text-center text-slate-600" data-testid="workers-empty">
                        {format!("No worker is connected. Start one with `{}`; remote steps wait until one serves them.", view.worker_command)}
                    </div>
                }
                    .into_any()
            } else {
                view! {
                    <div class="overflow-x-auto rounded-lg border border-slate-200 bg-white">
                        <table class="min-w-full text-sm" data-testid="workers">
                            <thead class="bg-slate-100 text-left text-xs uppercase tracking-wide text-slate-600">
                                <tr>
                                    <th class="px-3 py-2">"Serves (name@partition)"</th>
                                    <th class="px-3 py-2 text-right">"Workers"</th>
                                    <th class="px-3 py-2">"Last seen (UTC)"</th>
                                </tr>
                            </thead>
                            <tbody>{workers}</tbody>
                        </table>
                    </div>
                }
                    .into_any()
            }}
        </section>
        <PlansSection plans save />
    }
}
