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
    /// The right password of an account an operator disabled.
    #[error("this account is disabled; ask an operator to enable it (durable user enable)")]
    AccountDisabled,
    /// Too many failed logins for this email or address; wait before trying again.
    #[error(
        "too many failed logins; wait {retry_after_minutes} minutes and try again, or ask an operator to reset your password"
    )]
    TooManyAttempts {
        /// Minutes until the oldest counted failure leaves the window.
        retry_after_minutes: u32,
    },
    /// Too many logins are being checked right now; nothing was checked or counted.
    #[error("the server is busy checking other logins; try again in a few seconds")]
    Busy,
    /// The request is larger than the server takes; nothing was done.
    #[error("the request is larger than the server takes ({limit_bytes} bytes); send less")]
    TooLarge {
        /// The most the server reads of one request.
        limit_bytes: u64,
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

impl AppError {
    /// The HTTP status a server function answers this error with: 4xx for the caller's
    /// mistakes, 5xx for ours.
    pub fn status(&self) -> u16 {
        match self {
            AppError::Unauthorized | AppError::BadCredentials => 401,
            AppError::Forbidden | AppError::AccountDisabled => 403,
            AppError::TooManyAttempts { .. } | AppError::Busy => 429,
            AppError::TooLarge { .. } => 413,
            AppError::Invalid(_) => 400,
            AppError::Internal | AppError::Transport(_) => 500,
        }
    }
}

impl FromServerFnError for AppError {
    type Encoder = JsonEncoding;

    fn from_server_fn_error(value: ServerFnErrorErr) -> Self {
        match value {
            // The server could not read the call's arguments: a missing field, a body of
            // another content type, a body cut short. The caller's request is at fault.
            ServerFnErrorErr::Args(m) | ServerFnErrorErr::MissingArg(m) => {
                AppError::Invalid(format!(
                    "the request's fields could not be read ({m}); send the form as the page does"
                ))
            }
            // On the server, a body that could not be read (cut off, or over the limit).
            #[cfg(feature = "ssr")]
            ServerFnErrorErr::Deserialization(m) => AppError::Invalid(format!(
                "the request's body could not be read ({m}); send the form as the page does"
            )),
            other => AppError::Transport(other.to_string()),
        }
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

/// The error of a form posted without JavaScript, as a closure over the page's URL: the server
/// answers such a post by redirecting back with the error in the query (`__err`, server_fn's
/// progressive enhancement, with the form's server function in `__path`), and the page shows it
/// where a hydrated form shows its own. `from` names the one server function whose errors this
/// page shows (`None`: any of the dashboard's, under `/api/`). Anyone can link to a page with a
/// made-up error, so it is shown as text, in the place and style of a form's error, never more.
pub fn posted_form_error(
    from: Option<&'static str>,
) -> impl Fn() -> Option<String> + Copy + Send + Sync + 'static {
    use leptos::prelude::With;
    use leptos::server_fn::error::ServerFnUrlError;

    let query = leptos_router::hooks::use_query_map();
    move || {
        query.with(|q| {
            let path = q.get("__path")?;
            let ours = match from {
                Some(from) => path == from,
                None => path.starts_with("/api/"),
            };
            ours.then(|| q.get("__err"))
                .flatten()
                .map(|e| ServerFnUrlError::<AppError>::decode_err(&e).to_string())
        })
    }
}
