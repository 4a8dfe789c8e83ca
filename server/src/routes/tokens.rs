//! API tokens over the API, for the operator token: list a tenant's tokens, issue one (its
//! secret is in the answer, once), revoke one by id. The tenant in the URL names whose tokens
//! to act on; it grants nothing, since only the operator token reaches these routes.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{delete, get};
use axum::{Json, Router};
use durable::gateway::issue_api_token;
use durable::model::{ApiToken, Namespace, TokenScope};
use serde::{Deserialize, Serialize};

use crate::auth::Operator;
use crate::error::{ApiError, store_error};
use crate::secret::now_ms;
use crate::state::ServerState;

pub fn router() -> Router<ServerState> {
    Router::new()
        .route("/tenants/{tenant}/tokens", get(list).post(issue))
        .route("/tokens/{id}", delete(revoke))
}

/// `POST /tenants/{tenant}/tokens` body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct IssueBody {
    /// What the token is for.
    name: String,
    /// `read` or `read-write` (the default).
    #[serde(default)]
    scope: Option<String>,
    /// Seconds until it stops working by itself; none: never.
    #[serde(default)]
    expires_in_seconds: Option<u32>,
}

/// An issued token: its listing, and the token itself, shown this once.
#[derive(Debug, Serialize)]
struct Issued {
    #[serde(flatten)]
    listed: ApiToken,
    token: String,
}

fn tenant(raw: &str) -> Result<Namespace, ApiError> {
    Namespace::tenant(raw).map_err(|e| ApiError::BadRequest(e.to_string()))
}

async fn list(
    _operator: Operator,
    State(state): State<ServerState>,
    Path(raw): Path<String>,
) -> Result<Json<Vec<ApiToken>>, ApiError> {
    let tenant = tenant(&raw)?;
    let tokens = state
        .app
        .accounts
        .tokens(Some(&tenant))
        .await
        .map_err(store_error)?;
    Ok(Json(tokens))
}

async fn issue(
    _operator: Operator,
    State(state): State<ServerState>,
    Path(raw): Path<String>,
    body: Bytes,
) -> Result<(StatusCode, Json<Issued>), ApiError> {
    let tenant = tenant(&raw)?;
    let body: IssueBody = serde_json::from_slice(&body).map_err(|e| {
        ApiError::BadRequest(format!(
            "invalid token request: {e}; expected {{\"name\": …, \"scope\": \"read\" | \"read-write\", \"expires_in_seconds\": …}}"
        ))
    })?;
    let name = ApiToken::check_name(&body.name).map_err(ApiError::BadRequest)?;
    let scope = match body.scope.as_deref().unwrap_or("read-write") {
        "read" => TokenScope::Read,
        "read-write" => TokenScope::ReadWrite,
        other => {
            return Err(ApiError::BadRequest(format!(
                "`scope` {other:?} is not a tenant token's: use read or read-write"
            )));
        }
    };
    let now = now_ms();
    let expires_at = match body.expires_in_seconds {
        Some(0) => {
            return Err(ApiError::BadRequest(
                "`expires_in_seconds` must be at least 1; leave it out for a token that does not expire".into(),
            ));
        }
        Some(seconds) => Some(now + i64::from(seconds) * 1_000),
        None => None,
    };
    let (stored, token) = issue_api_token(Some(tenant), name, scope, expires_at, now);
    let listed = stored.token.clone();
    state
        .app
        .accounts
        .create_token(stored)
        .await
        .map_err(store_error)?;
    tracing::info!(token = %listed.id, tenant = ?listed.tenant, "API token issued over the API");
    Ok((StatusCode::CREATED, Json(Issued { listed, token })))
}

async fn revoke(
    _operator: Operator,
    State(state): State<ServerState>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let revoked = state
        .app
        .accounts
        .revoke_token(&id, None, now_ms())
        .await
        .map_err(store_error)?;
    if revoked {
        tracing::info!(token = %id, "API token revoked over the API");
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::Missing(format!(
            "no live token `{id}`: list a tenant's tokens at GET /api/v1/tenants/NAME/tokens"
        )))
    }
}
