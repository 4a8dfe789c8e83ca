//! `/api/v1/shared-pools`: the operator's shared pools, one group of workers serving several
//! tenants' steps (`durable worker --pool NAME`, no tenant), and their grants. Operator token
//! only; the tenant in a grant's URL names whom the operator grants to, which it may do for any
//! tenant. A tenant sees the pools granted to it in its own `GET /api/v1/pools`.

use std::collections::BTreeMap;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, put};
use axum::{Json, Router};
use durable::model::{Namespace, PoolName, SharedPool};
use serde::Deserialize;
use serde_json::{Value, json};

use super::params::json_body;
use crate::auth::Operator;
use crate::error::{ApiError, engine_error};
use crate::state::ServerState;

/// The shared pools routes.
pub fn router() -> Router<ServerState> {
    Router::new()
        .route("/shared-pools", get(list))
        .route("/shared-pools/{name}", put(save).get(show).delete(remove))
        .route(
            "/shared-pools/{name}/grants/{tenant}",
            put(grant).delete(revoke),
        )
}

/// `PUT /shared-pools/{name}` body.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SharedPoolBody {
    #[serde(default)]
    labels: BTreeMap<String, String>,
}

fn pool_name(raw: &str) -> Result<PoolName, ApiError> {
    PoolName::parse(raw).map_err(|e| ApiError::BadRequest(e.to_string()))
}

fn tenant(raw: &str) -> Result<Namespace, ApiError> {
    Namespace::tenant(raw).map_err(|e| ApiError::BadRequest(e.to_string()))
}

fn missing(name: &PoolName) -> ApiError {
    ApiError::Missing(format!(
        "no shared pool `{name}`; create it with PUT /api/v1/shared-pools/{name}"
    ))
}

async fn list(
    operator: Operator,
    State(state): State<ServerState>,
) -> Result<Json<Value>, ApiError> {
    let pools = state.tenant_views.shared_pools(&operator).list().await;
    Ok(Json(
        json!({ "shared_pools": pools.map_err(engine_error)? }),
    ))
}

async fn find(
    state: &ServerState,
    operator: &Operator,
    name: &PoolName,
) -> Result<SharedPool, ApiError> {
    let pools = state.tenant_views.shared_pools(operator).list().await;
    pools
        .map_err(engine_error)?
        .into_iter()
        .find(|p| &p.name == name)
        .ok_or_else(|| missing(name))
}

async fn show(
    operator: Operator,
    State(state): State<ServerState>,
    Path(name): Path<String>,
) -> Result<Json<SharedPool>, ApiError> {
    let name = pool_name(&name)?;
    Ok(Json(find(&state, &operator, &name).await?))
}

async fn save(
    operator: Operator,
    State(state): State<ServerState>,
    Path(name): Path<String>,
    body: Bytes,
) -> Result<(StatusCode, Json<SharedPool>), ApiError> {
    let name = pool_name(&name)?;
    let body: SharedPoolBody = json_body(&body)?;
    let desk = state.tenant_views.shared_pools(&operator);
    let (pool, created) = desk.put(name, body.labels).await.map_err(engine_error)?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(pool)))
}

async fn remove(
    operator: Operator,
    State(state): State<ServerState>,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    let name = pool_name(&name)?;
    let desk = state.tenant_views.shared_pools(&operator);
    match desk.delete(&name).await.map_err(engine_error)? {
        true => Ok(StatusCode::NO_CONTENT),
        false => Err(missing(&name)),
    }
}

async fn grant(
    operator: Operator,
    State(state): State<ServerState>,
    Path((name, to)): Path<(String, String)>,
) -> Result<Json<SharedPool>, ApiError> {
    let (name, to) = (pool_name(&name)?, tenant(&to)?);
    let desk = state.tenant_views.shared_pools(&operator);
    desk.grant(&name, &to).await.map_err(engine_error)?;
    Ok(Json(find(&state, &operator, &name).await?))
}

async fn revoke(
    operator: Operator,
    State(state): State<ServerState>,
    Path((name, from)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    let (name, from) = (pool_name(&name)?, tenant(&from)?);
    let desk = state.tenant_views.shared_pools(&operator);
    match desk.revoke(&name, &from).await.map_err(engine_error)? {
        true => Ok(StatusCode::NO_CONTENT),
        false => Err(ApiError::Missing(format!(
            "shared pool `{name}` is not granted to `{from}`"
        ))),
    }
}
