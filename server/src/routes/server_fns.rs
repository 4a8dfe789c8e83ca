//! How a dashboard call's failure reaches HTTP. Leptos answers every error a server function
//! returns, or meets while reading its arguments, with `500`; a client, a proxy and a log then
//! cannot tell a typo from an outage. Here each takes the status its [`AppError`] deserves (a
//! missing field or a body of another type is `400`), and a body declared larger than the
//! server reads is refused before anything reads it (`413`). The body stays the JSON-encoded
//! [`AppError`] the hydrated page decodes.

use app::AppError;
use axum::body::{Body, to_bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// The header server functions mark their error answers with.
const SERVER_FN_ERROR: &str = "serverfnerror";

/// The largest error body re-read to find its status; [`AppError`]s are a line.
const ERROR_BODY_LIMIT: usize = 64 * 1024;

/// Refuses bodies declared over `limit` bytes, and gives server functions' error answers
/// their status.
pub async fn answer_with_status(
    State(limit): State<usize>,
    request: Request,
    next: Next,
) -> Response {
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return encoded(&AppError::TooLarge {
            limit_bytes: limit as u64,
        });
    }
    let response = next.run(request).await;
    if response.status() != StatusCode::INTERNAL_SERVER_ERROR
        || !response.headers().contains_key(SERVER_FN_ERROR)
    {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = to_bytes(body, ERROR_BODY_LIMIT).await else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    if let Ok(error) = serde_json::from_slice::<AppError>(&bytes) {
        parts.status =
            StatusCode::from_u16(error.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    }
    Response::from_parts(parts, Body::from(bytes))
}

/// `error` as a server function answers it: its status, its JSON encoding.
fn encoded(error: &AppError) -> Response {
    let status = StatusCode::from_u16(error.status()).unwrap_or(StatusCode::BAD_REQUEST);
    let body = serde_json::to_string(error).unwrap_or_else(|_| "\"Internal\"".to_owned());
    let mut response = (status, body).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}
