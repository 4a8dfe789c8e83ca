//! HTTP routes: the dashboard (Leptos pages and server functions, session-authenticated), its
//! live event stream, the JSON API under `/api/v1` (bearer tenant tokens), `/healthz` and
//! `/metrics` (an operator token). This file only lists them; what handlers share is
//! [`crate::state`], sessions are [`crate::sessions`], and who is asking is [`crate::auth`]. API
//! handlers reach runs only through a [`crate::tenant_view::TenantView`]; dashboard server functions only
//! through an [`app::ssr::SessionView`].

mod api;
mod connections;
mod export;
mod handlers;
mod headers;
mod health;
mod params;
mod plans;
mod pools;
mod publish;
mod routing;
mod runs;
mod schedules;
mod server_fns;
mod shared_pools;
mod sse;
mod tokens;

use app::{App, shell};
use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::middleware;
use axum::routing::get;
use leptos::prelude::*;
use leptos_axum::{LeptosRoutes, generate_route_list};
use tower_http::trace::TraceLayer;
use tower_sessions::{SessionManagerLayer, SessionStore};

use crate::auth;
use crate::sessions::Sessions;
use crate::state::ServerState;

/// The whole HTTP surface.
pub fn router(state: ServerState, sessions: Sessions) -> Router {
    match sessions {
        Sessions::Sqlite(layer) => router_with(state, layer),
        Sessions::Postgres(layer) => router_with(state, layer),
    }
}

fn router_with<S: SessionStore + Clone>(
    state: ServerState,
    sessions: SessionManagerLayer<S>,
) -> Router {
    // A start's body holds its payload and, at most, tags and attributes of a few dozen KiB.
    let body_limit = state.app.limits().max_payload_bytes.saturating_add(1 << 20);
    let routes = generate_route_list(App);
    let app_state = state.app.clone();
    let context = move || provide_context(app_state.clone());
    let options = state.app.leptos_options.clone();
    let dashboard = Router::new()
        .leptos_routes_with_context(&state, routes, context.clone(), move || {
            shell(options.clone())
        })
        .route("/events", get(sse::dashboard_events))
        .route("/runs/{id}/history.json", get(export::download_history))
        .fallback(leptos_axum::file_and_error_handler_with_context::<
            ServerState,
            _,
        >(context, shell))
        .layer(middleware::from_fn_with_state(
            state.app.clone(),
            auth::require_login,
        ))
        .layer(middleware::from_fn_with_state(
            state.public_url.clone(),
            auth::same_origin,
        ))
        .layer(sessions)
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(middleware::from_fn_with_state(
            body_limit,
            server_fns::answer_with_status,
        ));
    let https = state.public_url.as_ref().is_some_and(|u| u.is_https());
    Router::new()
        .merge(dashboard)
        .nest("/api/v1", api::router(body_limit))
        .route("/healthz", get(health::healthz))
        .route("/metrics", get(crate::metrics::metrics))
        .with_state(state)
        .layer(middleware::from_fn_with_state(https, headers::secure))
        .layer(TraceLayer::new_for_http().make_span_with(request_span))
}

/// A request's span, when the request carries a W3C `traceparent`: it continues the caller's
/// trace, so a run started by a traced service joins that service's trace. Without one, no
/// span (a start begins its run's trace itself): a span per request costs more than it tells.
fn request_span<B>(request: &axum::http::Request<B>) -> tracing::Span {
    let Some(traceparent) = request
        .headers()
        .get("traceparent")
        .and_then(|v| v.to_str().ok())
    else {
        return tracing::Span::none();
    };
    let span = tracing::info_span!(
        "request",
        method = %request.method(),
        path = %request.uri().path()
    );
    durable::trace_context::continue_trace(&span, Some(traceparent));
    span
}
