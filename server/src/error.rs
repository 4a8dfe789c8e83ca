//! API errors: one enum, mapped to HTTP once. Details of internal failures are logged, never
//! sent.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// What an API call can fail with.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// Missing or invalid bearer token.
    #[error("{0}")]
    Unauthorized(String),
    /// The request is malformed; the message names the fix.
    #[error("{0}")]
    BadRequest(String),
    /// Nothing visible at that id.
    #[error("no run with that id is visible to this token")]
    NotFound,
    /// The request conflicts with the run's state; the message says how.
    #[error("{0}")]
    Conflict(String),
    /// The server cannot carry the request out now (it is shutting down); the message says
    /// what the caller should check before trying again.
    #[error("{0}")]
    Unavailable(String),
    /// A failure on our side.
    #[error("internal error")]
    Internal(#[source] anyhow::Error),
}

impl ApiError {
    fn code(&self) -> (StatusCode, &'static str) {
        match self {
            ApiError::Unauthorized(_) => (StatusCode::UNAUTHORIZED, "unauthorized"),
            ApiError::BadRequest(_) => (StatusCode::BAD_REQUEST, "bad-request"),
            ApiError::NotFound => (StatusCode::NOT_FOUND, "not-found"),
            ApiError::Conflict(_) => (StatusCode::CONFLICT, "conflict"),
            ApiError::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
            ApiError::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        }
    }
}

/// Maps what the engine refused onto the API: the caller's mistakes are `400` with the
/// engine's message (which names the fix), anything else is ours.
pub fn engine_error(e: durable::EngineError) -> ApiError {
    use durable::EngineError;
    match e {
        EngineError::RunExists(_) => ApiError::Conflict(e.to_string()),
        e if e.is_callers() => ApiError::BadRequest(e.to_string()),
        EngineError::ShuttingDown => ApiError::Unavailable(e.to_string()),
        other => internal(other),
    }
}

/// Wraps a failure on our side; the details go to the log only.
pub fn internal(e: impl Into<anyhow::Error>) -> ApiError {
    ApiError::Internal(e.into())
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, code) = self.code();
        if let ApiError::Internal(e) = &self {
            tracing::error!(error = ?e, "API request failed");
        }
        (
            status,
            Json(json!({ "error": { "code": code, "message": self.to_string() } })),
        )
            .into_response()
    }
}
