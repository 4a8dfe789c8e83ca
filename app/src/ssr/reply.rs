//! How a server function's failure becomes its answer: the user's mistakes with a message that
//! names the fix, anything else logged here and answered as [`AppError::Internal`], each with
//! the HTTP status it deserves.

use leptos::prelude::*;

use crate::AppError;

/// Maps what the engine refused onto a form's error: the user's mistakes with the engine's
/// message (which names the fix), anything else as [`internal`].
pub fn engine_error(e: durable::EngineError) -> AppError {
    use durable::EngineError;
    match e {
        // Not the user's mistake, but something they can act on: the message says what.
        EngineError::CodeElsewhere { .. }
        | EngineError::Replay(..)
        | EngineError::RunEnded(_)
        | EngineError::ConnectionEdited(_)
        | EngineError::Secrets(durable::secrets::SecretError::NoMasterKey) => {
            AppError::Invalid(e.to_string())
        }
        e if e.is_callers() => AppError::Invalid(e.to_string()),
        e => internal(e),
    }
}

/// Maps a store failure: a value the database refused is the user's mistake (with the store's
/// message), anything else is [`internal`].
pub fn store_error(e: durable::store::StoreError) -> AppError {
    match e {
        durable::store::StoreError::Refused(_) => AppError::Invalid(e.to_string()),
        other => internal(other),
    }
}

/// Logs a server-side failure and turns it into the generic [`AppError::Internal`].
pub fn internal(e: impl std::fmt::Display) -> AppError {
    tracing::error!(error = %e, "server function failed");
    AppError::Internal
}

/// Gives a failed server function the HTTP status its error deserves (4xx for the caller's
/// mistakes), for calls from the hydrated client. A plain HTML form post keeps Leptos'
/// redirect back to the form instead.
pub fn reply<T>(result: Result<T, AppError>) -> Result<T, AppError> {
    use axum::http::StatusCode;
    use axum::http::header::ACCEPT;

    if let Err(e) = &result {
        let plain_form = use_context::<axum::http::request::Parts>()
            .and_then(|p| {
                p.headers
                    .get(ACCEPT)
                    .and_then(|v| v.to_str().ok())
                    .map(|v| v.contains("text/html"))
            })
            .unwrap_or(false);
        if !plain_form && let Some(response) = use_context::<leptos_axum::ResponseOptions>() {
            response.set_status(
                StatusCode::from_u16(e.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            );
            let retry_after = match e {
                AppError::TooManyAttempts {
                    retry_after_minutes,
                } => Some(u64::from(*retry_after_minutes) * 60),
                AppError::Busy => Some(2),
                _ => None,
            };
            if let Some(seconds) = retry_after {
                response.insert_header(
                    axum::http::header::RETRY_AFTER,
                    axum::http::HeaderValue::from(seconds),
                );
            }
        }
    }
    result
}
