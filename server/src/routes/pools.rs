//! `/api/v1/pools`: the token's tenant's worker pools, each with the partition its workers
//! serve, the workers live on it (with the capabilities and SDKs they announced) and its steps
//! out. Like every API route, the tenant is the bearer token's; a
//! pool of another tenant answers exactly like a missing one.

use std::collections::BTreeMap;

use axum::body::Bytes;
use axum::extract::Path;
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use durable::model::{PoolName, PoolStatus};
use serde::Deserialize;
use serde_json::{Value, json};

use super::params::json_body;
use crate::error::{ApiError, engine_error};
use crate::state::ServerState;
use crate::tenant_view::TenantView;

/// The pools routes.
pub fn router() -> Router<ServerState> {
    Router::new()
        .route("/pools", get(list))
        .route("/pools/{name}", get(show).put(put).delete(remove))
}

/// `PUT /pools/{name}` body.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PoolBody {
    /// What the pool offers (`{"region": "eu"}`); none when absent.
    #[serde(default)]
    labels: BTreeMap<String, String>,
}

fn pool_name(raw: &str) -> Result<PoolName, ApiError> {
    PoolName::parse(raw).map_err(|e| ApiError::BadRequest(e.to_string()))
}

async fn list(view: TenantView) -> Result<Json<Value>, ApiError> {
    let pools = view.pool_statuses().await.map_err(engine_error)?;
    Ok(Json(json!({ "pools": pools })))
}

async fn show(view: TenantView, Path(name): Path<String>) -> Result<Json<PoolStatus>, ApiError> {
    let name = pool_name(&name)?;
    let shown = view.pool_status(&name).await.map_err(engine_error)?;
    shown.map(Json).ok_or_else(|| {
        ApiError::Missing(format!(
            "no pool `{name}`; create it with PUT /api/v1/pools/{name}"
        ))
    })
}

async fn put(
    view: TenantView,
    Path(name): Path<String>,
    body: Bytes,
) -> Result<(StatusCode, Json<PoolStatus>), ApiError> {
    let name = pool_name(&name)?;
    let body: PoolBody = json_body(&body)?;
    let put = view
        .put_pool(name, body.labels)
        .await
        .map_err(engine_error)?;
    let status = if put.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let shown = view.saved_pool_status(put.pool).await;
    Ok((status, Json(shown)))
}

async fn remove(view: TenantView, Path(name): Path<String>) -> Result<StatusCode, ApiError> {
    let name = pool_name(&name)?;
    if view.delete_pool(&name).await.map_err(engine_error)? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::Missing(format!(
            "no pool `{name}`; create it with PUT /api/v1/pools/{name}"
        )))
    }
}
