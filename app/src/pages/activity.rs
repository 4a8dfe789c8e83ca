//! Load over time: throughput and step latency percentiles over the last hour or day, drawn on
//! the server as SVG (see `crate::ssr::charts`). The runs page shows its tenant's (an
//! operator's, every tenant's or its `?ns=` one's); the operator screen every tenant's. The
//! window is a link (`?window=day`), so it works without JavaScript; with it, the charts are
//! re-read every 15 seconds.

use crate::data;
use durable::model::ActivityWindow;
use leptos::prelude::*;
use leptos_router::hooks::use_query_map;

use crate::components::error_box::ErrorBox;
use crate::{ActivityView, AppError};

/// How often a hydrated page re-reads its charts.
#[cfg(feature = "hydrate")]
const REFRESH: std::time::Duration = std::time::Duration::from_secs(15);

/// The session's charts over `window` (`hour` or `day`), narrowed to namespace `ns` for an
/// operator bound to no tenant (a tenant's are its own, whatever `ns` says).
#[server(endpoint = "activity_charts")]
pub async fn activity_charts(window: String, ns: String) -> Result<ActivityView, AppError> {
    crate::ssr::reply(
        async move {
            use durable::model::series;
            use durable::runtime::{Clock, SystemClock};

            use crate::ssr::charts::{latency_chart, throughput_chart};
            use crate::ssr::{Need, SessionView};

            let view = SessionView::open(Need::Read, Some(&ns)).await?;
            let window = ActivityWindow::parse(Some(&window));
            let now = SystemClock.now();
            let minutes = view.activity(window.since_minute(now)).await?;
            let points = series(&minutes, window, now);
            let sum = |f: fn(&durable::model::ActivityPoint) -> u64| points.iter().map(f).sum();
            Ok(ActivityView {
                window,
                throughput: throughput_chart(&points, window),
                latency: latency_chart(&points, window),
                started: sum(|p| p.started),
                completed: sum(|p| p.completed),
                failed: sum(|p| p.failed),
                steps: sum(|p| p.steps),
            })
        }
        .await,
    )
}

/// The throughput and latency charts, with links to the other window. `hrefs` are the page's
/// own address with `window=hour` and with `window=day`; `ns` is the operator's namespace
/// filter (empty for none).
#[component]
pub fn ActivityPanel(
    #[prop(into)] hrefs: Signal<[String; 2]>,
    #[prop(into, optional)] ns: Signal<String>,
) -> impl IntoView {
    let query = use_query_map();
    let window = move || query.with(|q| q.get("window")).unwrap_or_default();
    let tick = RwSignal::new(0u32);
    // Started once hydrated (effects never run on the server), stopped when the panel goes.
    #[cfg(feature = "hydrate")]
    Effect::new(move |_| {
        if let Ok(timer) = set_interval_with_handle(move || tick.update(|t| *t += 1), REFRESH) {
            on_cleanup(move || timer.clear());
        }
    });
    let charts = data::resource(
        move || (window(), ns.get(), tick.get()),
        |(window, ns, _)| activity_charts(window, ns),
    );
    let link = move |w: ActivityWindow| {
        let href = move || hrefs.with(|h| h[usize::from(w == ActivityWindow::Day)].clone());
        let current = move || ActivityWindow::parse(Some(&window())) == w;
        view! {
            <a
                href=href
                class="rounded px-2 py-0.5"
                class=("bg-slate-800", current)
                class=("text-white", current)
                class=("text-indigo-700", move || !current())
                aria-current=move || current().then_some("true")
                data-testid=format!("window-{}", w.as_str())
            >
                {match w {
                    ActivityWindow::Hour => "Last hour",
                    ActivityWindow::Day => "Last day",
                }}
            </a>
        }
    };
    view! {
        <section class="mt-4 rounded-lg border border-slate-200 bg-white p-3" aria-label="Activity" data-testid="activity">
            <div class="flex flex-wrap items-center justify-between gap-2">
                <h2 class="text-sm font-semibold">"Activity"</h2>
                <nav class="flex gap-1 text-sm" aria-label="Chart window">
                    {link(ActivityWindow::Hour)}
                    {link(ActivityWindow::Day)}
                </nav>
            </div>
            <Transition fallback=|| view! { <p class="text-sm text-slate-500">"Loading charts…"</p> }>
                {move || charts.get().map(|r| match r {
                    Ok(c) => view! { <Charts charts=c /> }.into_any(),
                    Err(e) => view! { <ErrorBox error=e /> }.into_any(),
                })}
            </Transition>
        </section>
    }
}

#[component]
fn Charts(charts: ActivityView) -> impl IntoView {
    let legend = |items: [(&'static str, &'static str); 3]| {
        items
            .into_iter()
            .map(|(name, color)| {
                view! {
                    <span class="inline-flex items-center gap-1">
                        <span class="inline-block h-2 w-3 rounded-sm" style=format!("background:{color}")></span>
                        {name}
                    </span>
                }
            })
            .collect_view()
    };
    view! {
        <div class="mt-2 grid gap-4 md:grid-cols-2">
            <figure data-testid="throughput" data-started=charts.started data-completed=charts.completed data-failed=charts.failed>
                <figcaption class="flex flex-wrap items-baseline justify-between gap-2 text-xs text-slate-600">
                    <span class="font-medium text-slate-800">
                        {format!("Runs per {}", if charts.window == ActivityWindow::Day { "15 minutes" } else { "minute" })}
                    </span>
                    <span class="flex gap-3">{legend([("started", "#6366f1"), ("completed", "#10b981"), ("failed", "#ef4444")])}</span>
                </figcaption>
                <div inner_html=charts.throughput></div>
                <p class="text-xs text-slate-600" data-testid="throughput-totals">
                    {format!("{} started · {} completed · {} failed", charts.started, charts.completed, charts.failed)}
                </p>
            </figure>
            <figure data-testid="latency" data-steps=charts.steps>
                <figcaption class="flex flex-wrap items-baseline justify-between gap-2 text-xs text-slate-600">
                    <span class="font-medium text-slate-800">"Step run time"</span>
                    <span class="flex gap-3">{legend([("p50", "#0ea5e9"), ("p95", "#f59e0b"), ("p99", "#ef4444")])}</span>
                </figcaption>
                <div inner_html=charts.latency></div>
                <p class="text-xs text-slate-600">{format!("{} steps finished", charts.steps)}</p>
            </figure>
        </div>
    }
}
