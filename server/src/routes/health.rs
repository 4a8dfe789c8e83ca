//! `/healthz`: whether this process can serve, for load balancers and orchestrators.

use app::ssr::AppState;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};

/// Liveness and readiness: answers 200 when the store answers.
pub async fn healthz(State(dashboard): State<AppState>) -> (StatusCode, Json<Value>) {
    match dashboard.store_answers().await {
        Ok(()) => (StatusCode::OK, Json(json!({ "status": "ok" }))),
        Err(e) => {
            tracing::error!(error = %e, "health check: store unavailable");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                Json(json!({ "status": "unavailable", "reason": "store" })),
            )
        }
    }
}
