use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use durable::model::{RunQuery, Scope};
use serde_json::{Value, json};

use crate::state::ServerState;

/// Liveness and readiness: answers 200 when the store answers.
pub async fn healthz(State(state): State<ServerState>) -> (StatusCode, Json<Value>) {
    let probe = RunQuery {
        limit: 1,
        ..RunQuery::default()
    };
    match state
        .app
        .engine
        .store()
        .list_runs(&Scope::All, &probe)
        .await
    {
        Ok(_) => (StatusCode::OK, Json(json!({ "status": "ok" }))),
        Err(e) => {
            tracing::error!(error = %e, "health check: store unavailable");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                Json(json!({ "status": "unavailable", "reason": "store" })),
            )
        }
    }
}
