//! Who is asking. The dashboard knows its user from the session; the API from a signed tenant
//! token. Neither ever takes the tenant from the URL, a query string or a body.

use axum::extract::{Request, State};
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use durable::gateway::TokenSigner;
use durable::model::Namespace;
use tower_sessions::Session;

use crate::error::ApiError;
use crate::state::ServerState;

/// Sends a visitor without a valid session (none, or one ended by "log out everywhere") to the
/// login page before rendering a dashboard screen. (Server functions check the session
/// themselves; this only spares an empty page.)
pub async fn require_login(
    State(state): State<ServerState>,
    session: Session,
    req: Request,
    next: Next,
) -> Response {
    let path = req.uri().path();
    let is_page = path == "/" || path == "/operator" || path.starts_with("/runs/");
    let is_login = path == "/login";
    if is_page || is_login {
        let logged_in = matches!(
            app::ssr::user_of(state.app.accounts.as_ref(), &session).await,
            Ok(Some(_))
        );
        if is_page && !logged_in {
            return Redirect::to("/login").into_response();
        }
        if is_login && logged_in {
            return Redirect::to("/").into_response();
        }
    }
    next.run(req).await
}

/// Refuses a state-changing dashboard request that another site made the browser send (CSRF):
/// the browser says so in `Sec-Fetch-Site`, or the `Origin` is not the dashboard's own: the
/// configured public URL (`DURABLE_PUBLIC_URL`) when there is one, else the `Host` the request
/// was sent to. A client-sent `X-Forwarded-Host` is never trusted for this. The session cookie
/// is `SameSite=Lax` as well; this also covers browsers and subdomains that cookie rule lets
/// through. Requests without either header (curl, tests) are not from a browser page.
pub async fn same_origin(State(state): State<ServerState>, req: Request, next: Next) -> Response {
    use axum::http::{Method, StatusCode, header};

    if matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS) {
        return next.run(req).await;
    }
    let headers = req.headers();
    let cross_site = headers
        .get("sec-fetch-site")
        .is_some_and(|v| v.as_bytes() == b"cross-site");
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    let foreign_origin = headers
        .get(header::ORIGIN)
        .and_then(|o| o.to_str().ok())
        .is_some_and(|origin| match &state.public_url {
            Some(public) => !origin.eq_ignore_ascii_case(public.origin()),
            None => {
                let authority = origin.split_once("://").map_or(origin, |(_, rest)| rest);
                Some(authority) != host
            }
        });
    if cross_site || foreign_origin {
        tracing::warn!(path = %req.uri().path(), "refused a cross-site dashboard request");
        return (
            StatusCode::FORBIDDEN,
            "cross-site requests cannot change anything here; use the dashboard itself",
        )
            .into_response();
    }
    next.run(req).await
}

/// The tenant of an API request, from its verified `Authorization: Bearer <token>`: the only
/// place the API learns who is asking. `TenantView` (`routes/tenant.rs`) is built from it.
pub fn bearer_tenant(parts: &Parts, signer: &TokenSigner) -> Result<Namespace, ApiError> {
    let token = bearer(parts)?;
    if signer.is_operator(token) {
        return Err(ApiError::Forbidden(
            "the operator token acts on plans, not runs: use a tenant's token (durable token issue --tenant NAME)".into(),
        ));
    }
    let verified = signer
        .verify(token)
        .map_err(|e| ApiError::Unauthorized(e.to_string()))?;
    Ok(verified.tenant)
}

/// Proof that an API request carries the operator token (`durable token issue --operator`).
/// A tenant's valid token gets `403`; anything else `401`.
pub struct Operator(());

impl axum::extract::FromRequestParts<ServerState> for Operator {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &ServerState) -> Result<Self, ApiError> {
        let token = bearer(parts)?;
        if state.signer.is_operator(token) {
            return Ok(Operator(()));
        }
        match state.signer.verify(token) {
            Ok(_) => Err(ApiError::Forbidden(
                "only the operator token may do this; a tenant token reads its own plan at GET /api/v1/plan".into(),
            )),
            Err(e) => Err(ApiError::Unauthorized(e.to_string())),
        }
    }
}

/// The bearer token of a request, or why there is none.
fn bearer(parts: &Parts) -> Result<&str, ApiError> {
    let header = parts
        .headers
        .get(AUTHORIZATION)
        .ok_or_else(|| ApiError::Unauthorized("missing bearer token: send `Authorization: Bearer <token>` (create one with `durable token issue --tenant NAME`)".into()))?;
    header
        .to_str()
        .ok()
        .and_then(|h| h.strip_prefix("Bearer "))
        .map(str::trim)
        .ok_or_else(|| {
            ApiError::Unauthorized("the Authorization header must be `Bearer <token>`".into())
        })
}
