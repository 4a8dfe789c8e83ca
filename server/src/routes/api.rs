//! The JSON API for programs: `/api/v1/runs`, `/api/v1/schedules` and `/api/v1/events`, each
//! family of routes in a file of its own. The tenant is the one in the bearer token; any tenant
//! or namespace named in a query or body is not honoured. Every handler reaches runs through the
//! [`crate::tenant_view::TenantView`] extracted from that token, and nothing else.

use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::middleware;
use axum::routing::get;
use axum::{Json, Router};
use serde_json::Value;
use tower_http::limit::RequestBodyLimitLayer;

use super::sse;
use crate::error::json_errors;
use crate::state::ServerState;

/// The API's routes. A body may be `body_limit` bytes at most (past it: `413`), and every
/// error, the extractors' and the router's own included, answers in the JSON error shape.
pub fn router(body_limit: usize) -> Router<ServerState> {
    Router::new()
        .merge(super::runs::router())
        .merge(super::export::router())
        .route(
            "/events",
            get(sse::api_events).post(super::publish::publish),
        )
        .merge(super::handlers::router())
        .merge(super::schedules::router())
        .merge(super::pools::router())
        .merge(super::shared_pools::router())
        .merge(super::connections::router())
        .merge(super::routing::router())
        .merge(super::plans::router())
        .merge(super::tokens::router())
        .fallback(no_such_route)
        // A body declared larger is refused before it is read; one that runs on past the
        // limit is cut there.
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(RequestBodyLimitLayer::new(body_limit))
        .layer(middleware::map_response(json_errors))
}

/// An API path that names no route.
async fn no_such_route(uri: axum::http::Uri) -> (StatusCode, Json<Value>) {
    (
        StatusCode::NOT_FOUND,
        Json(serde_json::json!({ "error": {
            "code": "not-found",
            "message": format!("no API route at `{}`; the routes are under /api/v1/runs, /api/v1/schedules, /api/v1/pools, /api/v1/routing, /api/v1/events and /api/v1/tenants", uri.path()),
        }})),
    )
}
