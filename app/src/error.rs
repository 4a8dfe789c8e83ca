use leptos::server_fn::codec::JsonEncoding;
use leptos::server_fn::error::{FromServerFnError, ServerFnErrorErr};
use serde::{Deserialize, Serialize};

/// What a server function can answer instead of data. The messages are shown to the user as
/// they are, so each says what to do next; internal details are logged on the server only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, thiserror::Error)]
pub enum AppError {
    /// No logged-in session.
    #[error("you are not logged in; log in to continue")]
    Unauthorized,
    /// The session's role may not do this.
    #[error("your role cannot do this; ask an admin of your tenant")]
    Forbidden,
    /// Wrong email or password (deliberately not saying which).
    #[error("wrong email or password")]
    BadCredentials,
    /// Too many failed logins for this email or address; wait before trying again.
    #[error(
        "too many failed logins; wait {retry_after_minutes} minutes and try again, or ask an operator to reset your password"
    )]
    TooManyAttempts {
        /// Minutes until the oldest counted failure leaves the window.
        retry_after_minutes: u32,
    },
    /// The request was malformed; the message says what to fix.
    #[error("{0}")]
    Invalid(String),
    /// Something failed on the server; details are in the server log.
    #[error(
        "something went wrong on the server; try again, and check the server log if it persists"
    )]
    Internal,
    /// The server function call itself failed (network, encoding).
    #[error("the request failed: {0}")]
    Transport(String),
}

impl FromServerFnError for AppError {
    type Encoder = JsonEncoding;

    fn from_server_fn_error(value: ServerFnErrorErr) -> Self {
        AppError::Transport(value.to_string())
    }
}

/// Makes the server answer this page with `404 Not Found` (a no-op in the browser), so a missing
/// page or run is a real 404 to crawlers, scripts and tests.
pub fn respond_not_found() {
    #[cfg(feature = "ssr")]
    if let Some(resp) = leptos::prelude::use_context::<leptos_axum::ResponseOptions>() {
        resp.set_status(axum::http::StatusCode::NOT_FOUND);
    }
}
