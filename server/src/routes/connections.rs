//! `/api/v1/connections`: the token's tenant's connections. A read answers every field but the
//! secret values (which secret fields are set, and when); a write sets the secret fields it
//! names and keeps the others. Like every API route, the tenant is the bearer token's; a
//! connection of another tenant answers exactly like a missing one.

use axum::body::Bytes;
use axum::extract::Path;
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use durable::model::{ConnectionInfo, ConnectionName, ConnectionSpec};
use serde_json::{Value, json};

use crate::error::{ApiError, engine_error};
use crate::state::ServerState;
use crate::tenant_view::TenantView;

/// The connections routes.
pub fn router() -> Router<ServerState> {
    Router::new()
        .route("/connections", get(list))
        .route("/connections/{name}", get(show).put(put).delete(remove))
}

fn connection_name(raw: &str) -> Result<ConnectionName, ApiError> {
    ConnectionName::parse(raw).map_err(|e| ApiError::BadRequest(e.to_string()))
}

fn missing(name: &ConnectionName) -> ApiError {
    ApiError::Missing(format!(
        "no connection `{name}`; create it with PUT /api/v1/connections/{name}"
    ))
}

async fn list(view: TenantView) -> Result<Json<Value>, ApiError> {
    let connections = view.connections().await.map_err(engine_error)?;
    Ok(Json(json!({ "connections": connections })))
}

async fn show(
    view: TenantView,
    Path(name): Path<String>,
) -> Result<Json<ConnectionInfo>, ApiError> {
    let name = connection_name(&name)?;
    let found = view.connection(&name).await.map_err(engine_error)?;
    found.map(Json).ok_or_else(|| missing(&name))
}

async fn put(
    view: TenantView,
    Path(name): Path<String>,
    body: Bytes,
) -> Result<(StatusCode, Json<ConnectionInfo>), ApiError> {
    let name = connection_name(&name)?;
    let spec = ConnectionSpec::from_json(&body).map_err(ApiError::BadRequest)?;
    let saved = view
        .put_connection(name, spec)
        .await
        .map_err(engine_error)?;
    let status = if saved.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(saved.connection)))
}

async fn remove(view: TenantView, Path(name): Path<String>) -> Result<StatusCode, ApiError> {
    let name = connection_name(&name)?;
    if view.delete_connection(&name).await.map_err(engine_error)? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(missing(&name))
    }
}
