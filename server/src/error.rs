//! API errors: one enum, mapped to HTTP once. Details of internal failures are logged, never
//! sent.

use axum::Json;
use axum::http::{StatusCode, header};
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
    /// A valid token that may not do this (a tenant's, where an operator's is needed).
    #[error("{0}")]
    Forbidden(String),
    /// Over one of the tenant's plan ceilings: `429` (a rate or queue ceiling, with
    /// `Retry-After`) or `413` (a payload too large); nothing was changed.
    #[error(transparent)]
    QuotaExceeded(durable::QuotaExceeded),
    /// A payload over the server's input limit; nothing was changed.
    #[error("{0}")]
    TooLarge(String),
    /// Nothing visible at that id.
    #[error("no run with that id is visible to this token")]
    NotFound,
    /// Nothing else at that name; the message says what was looked for.
    #[error("{0}")]
    Missing(String),
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
            ApiError::Forbidden(_) => (StatusCode::FORBIDDEN, "forbidden"),
            ApiError::QuotaExceeded(q) if q.retry_after_ms.is_none() => {
                (StatusCode::PAYLOAD_TOO_LARGE, "quota-exceeded")
            }
            ApiError::QuotaExceeded(_) => (StatusCode::TOO_MANY_REQUESTS, "quota-exceeded"),
            ApiError::TooLarge(_) => (StatusCode::PAYLOAD_TOO_LARGE, "payload-too-large"),
            ApiError::NotFound | ApiError::Missing(_) => (StatusCode::NOT_FOUND, "not-found"),
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
    use durable::model::InputError;
    match e {
        EngineError::RunExists(_)
        | EngineError::ScheduleExists(_)
        | EngineError::UpdateIdTaken { .. }
        | EngineError::RunEnded(_)
        | EngineError::CodeElsewhere { .. }
        | EngineError::Replay(..)
        | EngineError::ConnectionEdited(_) => ApiError::Conflict(e.to_string()),
        EngineError::Secrets(durable::secrets::SecretError::NoMasterKey) => {
            ApiError::Unavailable(e.to_string())
        }
        EngineError::NoHandler { .. } => ApiError::Missing(e.to_string()),
        EngineError::QuotaExceeded(q) => ApiError::QuotaExceeded(q),
        EngineError::Input(InputError::PayloadTooLarge { .. }) => ApiError::TooLarge(e.to_string()),
        e if e.is_callers() => ApiError::BadRequest(e.to_string()),
        EngineError::ShuttingDown => ApiError::Unavailable(e.to_string()),
        other => internal(other),
    }
}

/// Maps a store failure: a value the database refused is the caller's (`400`, the store's
/// message), anything else is ours.
pub fn store_error(e: durable::store::StoreError) -> ApiError {
    match e {
        durable::store::StoreError::Refused(_) => ApiError::BadRequest(e.to_string()),
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
        if let ApiError::QuotaExceeded(q) = &self {
            // The shape the plan contract names: which limit, its value, when to retry.
            let retry_after = q.retry_after_ms.map(|ms| ((ms + 999) / 1000).max(1));
            let body = Json(json!({
                "error": code,
                "limit": q.limit.field(),
                "ceiling": q.ceiling,
                "retry_after": retry_after,
                "message": self.to_string(),
            }));
            return match retry_after {
                Some(secs) => {
                    (status, [(header::RETRY_AFTER, secs.to_string())], body).into_response()
                }
                None => (status, body).into_response(),
            };
        }
        (
            status,
            Json(json!({ "error": { "code": code, "message": self.to_string() } })),
        )
            .into_response()
    }
}

/// Gives every error the API answers the JSON shape of [`ApiError`], including those axum's
/// extractors and router answer in plain text (a query that does not parse, a body over the
/// limit, a method the route does not take, a path that matches nothing): a client then reads
/// one shape, whatever went wrong.
pub async fn json_errors(response: Response) -> Response {
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json") || v.starts_with("text/event-stream"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    let (parts, body) = response.into_parts();
    // Rejection texts are a line or two; anything longer is cut, not buffered.
    let text = match axum::body::to_bytes(body, 4096).await {
        Ok(bytes) => String::from_utf8_lossy(&bytes).trim().to_owned(),
        Err(_) => String::new(),
    };
    let code = status
        .canonical_reason()
        .unwrap_or("error")
        .to_lowercase()
        .replace(' ', "-");
    let message = if text.is_empty() {
        status.canonical_reason().unwrap_or("error").to_lowercase()
    } else {
        text
    };
    let mut headers = parts.headers;
    headers.remove(header::CONTENT_LENGTH);
    headers.remove(header::CONTENT_TYPE);
    let mut answer = (
        status,
        Json(json!({ "error": { "code": code, "message": message } })),
    )
        .into_response();
    for (name, value) in &headers {
        answer.headers_mut().append(name.clone(), value.clone());
    }
    answer
}
