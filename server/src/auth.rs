//! Who is asking. The dashboard knows its user from the session; the API from a stored API
//! token. Neither ever takes the tenant from the URL, a query string or a body.

use axum::extract::{Request, State};
use axum::http::Method;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use std::sync::Arc;

use app::ssr::AppState;
use axum::extract::FromRef;
use durable::gateway::{API_TOKEN_PREFIX, ApiTokenError, TokenSigner, check_api_token};
use durable::model::{ApiToken, Namespace, TokenScope};
use durable::store::Accounts;
use tower_sessions::Session;

use crate::error::ApiError;
use crate::public_url::PublicUrl;
use crate::secret::now_ms;

/// What checks an API request's bearer token: the stored API tokens, and the wire-token signer
/// that tells a wire token sent by mistake from an unknown one. Taken from the server's state
/// by whatever extractor needs it ([`FromRef`]), so this file knows nothing else of that state.
#[derive(Clone)]
pub struct ApiTokens {
    /// Where API tokens are stored.
    pub accounts: Arc<dyn Accounts>,
    /// Verifies wire tokens.
    pub signer: TokenSigner,
}

/// Sends a visitor without a valid session (none, or one ended by "log out everywhere") to the
/// login page before rendering a dashboard screen. (Server functions check the session
/// themselves; this only spares an empty page.)
pub async fn require_login(
    State(app): State<AppState>,
    session: Session,
    req: Request,
    next: Next,
) -> Response {
    let path = req.uri().path();
    let is_page = matches!(
        path,
        "/" | "/operator" | "/tokens" | "/schedules" | "/pools"
    ) || path.starts_with("/runs/");
    let is_login = path == "/login";
    if is_page || is_login {
        let logged_in = matches!(
            app::ssr::user_of(app.accounts.as_ref(), &session).await,
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
pub async fn same_origin(
    State(public_url): State<Option<PublicUrl>>,
    req: Request,
    next: Next,
) -> Response {
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
        .is_some_and(|origin| match &public_url {
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

/// Whether `path` asks a run a query: `…/runs/{id}/query/{name}`.
fn is_query(path: &str) -> bool {
    let segments: Vec<&str> = path.trim_end_matches('/').rsplit('/').take(4).collect();
    matches!(segments.as_slice(), [_, "query", _, "runs"])
}

/// The tenant of an API request, from its `Authorization: Bearer <token>`: an API token that is
/// live (not revoked, not expired; looked up at every request, so a revocation holds at once on
/// every process), of a tenant, and allowed this method (a read-only token reads only). The only
/// place the API learns who is asking: `TenantView` (`tenant_view.rs`) is built from it.
pub async fn bearer_tenant(parts: &Parts, tokens: &ApiTokens) -> Result<Namespace, ApiError> {
    let token = api_token(parts, tokens).await?;
    let Some(tenant) = token.tenant else {
        return Err(ApiError::Forbidden(
            "an operator token acts on plans and tokens, not runs: use a tenant's token (durable token issue --tenant NAME)".into(),
        ));
    };
    // A query is a POST (its argument is a body) that changes nothing: a read.
    let reads = matches!(parts.method, Method::GET | Method::HEAD)
        || (parts.method == Method::POST && is_query(parts.uri.path()));
    if token.scope == TokenScope::Read && !reads {
        return Err(ApiError::Forbidden(format!(
            "token `{}` is read-only; start and act on runs with a read-write token (durable token issue --tenant {tenant})",
            token.name
        )));
    }
    Ok(tenant)
}

/// Proof that an API request carries a live operator token (`durable token issue --operator`).
/// A tenant's valid token gets `403`; anything else `401`.
pub struct Operator(());

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Operator
where
    ApiTokens: FromRef<S>,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let token = api_token(parts, &ApiTokens::from_ref(state)).await?;
        if token.scope == TokenScope::Operator {
            return Ok(Operator(()));
        }
        Err(ApiError::Forbidden(
            "only an operator token may do this; a tenant token reads its own plan at GET /api/v1/plan".into(),
        ))
    }
}

/// The live API token a request carries, or why it has none.
async fn api_token(parts: &Parts, tokens: &ApiTokens) -> Result<ApiToken, ApiError> {
    let bearer = bearer(parts)?;
    if !bearer.starts_with(API_TOKEN_PREFIX) && tokens.signer.verify(bearer).is_ok() {
        return Err(ApiError::Unauthorized(
            "this is a wire token (it signs SDK messages on Redis); the API takes an API token: durable token issue --tenant NAME".into(),
        ));
    }
    check_api_token(tokens.accounts.as_ref(), bearer, now_ms())
        .await
        .map_err(|e| match e {
            ApiTokenError::Store(e) => crate::error::store_error(e),
            refused => ApiError::Unauthorized(refused.to_string()),
        })
}

/// The bearer token of a request, or why there is none.
fn bearer(parts: &Parts) -> Result<&str, ApiError> {
    let header = parts
        .headers
        .get(AUTHORIZATION)
        .ok_or_else(|| ApiError::Unauthorized("missing bearer token: send `Authorization: Bearer <token>` (issue one with `durable token issue --tenant NAME`)".into()))?;
    header
        .to_str()
        .ok()
        .and_then(|h| h.strip_prefix("Bearer "))
        .map(str::trim)
        .ok_or_else(|| {
            ApiError::Unauthorized("the Authorization header must be `Bearer <token>`".into())
        })
}
