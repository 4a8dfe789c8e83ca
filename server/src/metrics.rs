//! `/metrics`: this process's metrics in the Prometheus text format, for an operator token.
//!
//! Two sources. What the engine measures as it works (step and turn latencies, commits, errors,
//! throttling, see [`durable::metrics`]) and this server's own (SSE clients) go through the
//! `metrics` facade into the exporter's registry. The run counts (`durable_runs`,
//! `durable_runs_started_total`, `durable_runs_finished_total`) are the store's: read at each
//! scrape from the counters it keeps with every change, so every control plane reports the
//! same cluster-wide values (aggregate them with `max`, not `sum`), exact across restarts.
//!
//! A store-less worker serves only the first kind, on a listener of its own
//! ([`worker_router`]).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use axum::Router;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::http::header::{AUTHORIZATION, CONTENT_TYPE};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use durable::gateway::is_configured_token;
use durable::metrics::{
    BATCH, BATCH_BUCKETS, COMMIT, LATENCY_BUCKETS, STEP_DURATION, STEP_QUEUE, TURN,
};
use durable::model::Scope;
use durable::store::Store;
use metrics::{Unit, counter, describe_counter, describe_gauge, gauge};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::auth::Operator;
use crate::error::{ApiError, store_error};

/// Runs now, by tenant, workflow and status.
const RUNS: &str = "durable_runs";
/// Runs ever started, by tenant and workflow.
const STARTED: &str = "durable_runs_started_total";
/// Runs ever finished, by tenant, workflow and final status.
const FINISHED: &str = "durable_runs_finished_total";
/// Live event streams open on this process.
const SSE_CLIENTS: &str = "durable_sse_clients";

/// The Prometheus text format's media type.
const EXPOSITION: &str = "text/plain; version=0.0.4; charset=utf-8";

/// How often the exporter's histograms are maintained between scrapes.
const UPKEEP_EVERY: Duration = Duration::from_secs(5);

/// Installs this process's recorder (once, before anything is measured) and keeps it.
pub fn install() -> anyhow::Result<PrometheusHandle> {
    let handle = [STEP_DURATION, STEP_QUEUE, TURN, COMMIT]
        .into_iter()
        .try_fold(PrometheusBuilder::new(), |b, name| {
            b.set_buckets_for_metric(Matcher::Full(name.into()), &LATENCY_BUCKETS)
        })
        .and_then(|b| b.set_buckets_for_metric(Matcher::Full(BATCH.into()), &BATCH_BUCKETS))
        .context("configuring the metrics' buckets")?
        .install_recorder()
        .context("installing the metrics recorder")?;
    durable::metrics::describe();
    describe_gauge!(
        RUNS,
        Unit::Count,
        "Runs now, by tenant, workflow and status."
    );
    describe_counter!(
        STARTED,
        Unit::Count,
        "Runs ever started, by tenant and workflow."
    );
    describe_counter!(
        FINISHED,
        Unit::Count,
        "Runs ever finished, by tenant, workflow and final status."
    );
    describe_gauge!(
        SSE_CLIENTS,
        Unit::Count,
        "Live event streams open on this process."
    );
    let upkeep = handle.clone();
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(UPKEEP_EVERY);
        loop {
            ticks.tick().await;
            upkeep.run_upkeep();
        }
    });
    Ok(handle)
}

/// What `/metrics` renders: the exporter's registry and the store's counts in the engine's
/// scope. Cheap to clone.
#[derive(Clone)]
pub struct Metrics {
    handle: PrometheusHandle,
    store: Arc<dyn Store>,
    scope: Scope,
    /// The `durable_runs` series reported before: one whose runs are all gone reads 0.
    reported: Arc<Mutex<HashSet<[String; 3]>>>,
}

impl Metrics {
    /// Renders `handle`'s registry with the counts `store` keeps in `scope`.
    pub fn new(handle: PrometheusHandle, store: Arc<dyn Store>, scope: Scope) -> Self {
        Metrics {
            handle,
            store,
            scope,
            reported: Arc::default(),
        }
    }

    /// The whole exposition, the store's counts read now.
    async fn render(&self) -> Result<String, ApiError> {
        let (counts, totals) = tokio::try_join!(
            self.store.run_counts(&self.scope),
            self.store.run_totals(&self.scope)
        )
        .map_err(store_error)?;
        {
            let mut reported = self.reported.lock().unwrap_or_else(|p| p.into_inner());
            let mut now = HashSet::with_capacity(counts.len());
            for c in counts {
                let key = [
                    c.namespace.to_string(),
                    c.workflow,
                    c.status.as_str().to_owned(),
                ];
                gauge!(RUNS, "tenant" => key[0].clone(), "workflow" => key[1].clone(), "status" => key[2].clone())
                    .set(c.count as f64);
                now.insert(key);
            }
            for [tenant, workflow, status] in reported.difference(&now) {
                gauge!(RUNS, "tenant" => tenant.clone(), "workflow" => workflow.clone(), "status" => status.clone())
                    .set(0.0);
            }
            *reported = now;
        }
        for t in totals {
            let (tenant, workflow) = (t.namespace.to_string(), t.workflow);
            counter!(STARTED, "tenant" => tenant.clone(), "workflow" => workflow.clone())
                .absolute(t.started);
            for f in t.finished {
                counter!(FINISHED, "tenant" => tenant.clone(), "workflow" => workflow.clone(), "status" => f.status.as_str())
                    .absolute(f.count);
            }
        }
        Ok(self.handle.render())
    }
}

/// `GET /metrics`: for an operator token only (`durable token issue --operator`).
pub async fn metrics(_: Operator, State(metrics): State<Metrics>) -> Result<Response, ApiError> {
    let body = metrics.render().await?;
    Ok(([(CONTENT_TYPE, EXPOSITION)], body).into_response())
}

/// A store-less worker's HTTP surface: `/metrics` alone, for the scrape secret it was given
/// (`DURABLE_METRICS_TOKEN`); 401 for anything else.
pub fn worker_router(handle: PrometheusHandle, token: String) -> Router {
    let token = Arc::new(token);
    Router::new().route(
        "/metrics",
        get(move |headers: HeaderMap| async move {
            let bearer = headers
                .get(AUTHORIZATION)
                .and_then(|h| h.to_str().ok())
                .and_then(|h| h.strip_prefix("Bearer "))
                .map(str::trim);
            match bearer {
                Some(bearer) if is_configured_token(&token, bearer) => (
                    [(CONTENT_TYPE, EXPOSITION)],
                    handle.render(),
                )
                    .into_response(),
                _ => ApiError::Unauthorized(
                    "send the scrape secret this worker was started with: `Authorization: Bearer <DURABLE_METRICS_TOKEN>`".into(),
                )
                .into_response(),
            }
        }),
    )
}

/// One open live event stream, counted while it lives.
pub struct SseClient(());

impl SseClient {
    /// Counts a stream that opens now.
    pub fn open() -> Self {
        gauge!(SSE_CLIENTS).increment(1.0);
        SseClient(())
    }
}

impl Drop for SseClient {
    fn drop(&mut self) {
        gauge!(SSE_CLIENTS).decrement(1.0);
    }
}
