//! `/api/v1/pools`: the token's tenant's worker pools, each with the partition its workers
//! serve and the workers live on it. Like every API route, the tenant is the bearer token's; a
//! pool of another tenant answers exactly like a missing one.

use std::collections::BTreeMap;

use axum::body::Bytes;
use axum::extract::Path;
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use durable::model::{Millis, Pool, PoolName, WorkerGroup};
use serde::{Deserialize, Serialize};
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

/// A live group of workers on a pool, as a pool lists it.
#[derive(Serialize)]
struct Workers {
    /// The step or workflow they serve.
    name: String,
    /// How many are live.
    workers: u32,
    /// When one was last heard from.
    last_seen: Option<Millis>,
}

/// A pool as every route answers it: where its workers connect, and who is live there.
#[derive(Serialize)]
struct Shown {
    #[serde(flatten)]
    pool: Pool,
    /// The partition its workers serve: `durable worker --tenant T --pool P`, or an SDK
    /// worker with this partition.
    partition: String,
    /// Its live workers, by what they serve.
    workers: Vec<Workers>,
    /// Its steps sent and not yet answered (waiting or running).
    waiting: u64,
}

fn shown(pool: Pool, groups: &[WorkerGroup], out: &[(String, u64)]) -> Shown {
    let partition = pool.partition();
    let waiting = out
        .iter()
        .filter(|(token, _)| durable::transport::naming::split_token(token).1 == partition)
        .map(|(_, n)| n)
        .sum();
    let workers = groups
        .iter()
        .filter(|g| g.partition.as_ref() == Some(&partition))
        .map(|g| Workers {
            name: g.name.clone(),
            workers: g.workers,
            last_seen: g.last_seen,
        })
        .collect();
    Shown {
        partition: partition.to_string(),
        pool,
        workers,
        waiting,
    }
}

fn pool_name(raw: &str) -> Result<PoolName, ApiError> {
    PoolName::parse(raw).map_err(|e| ApiError::BadRequest(e.to_string()))
}

/// Live workers and the steps out by token, or none when they cannot be read (a pool is
/// shown either way).
async fn groups(view: &TenantView) -> (Vec<WorkerGroup>, Vec<(String, u64)>) {
    let groups = view.worker_groups().await.unwrap_or_default();
    (groups, view.steps_out().await.unwrap_or_default())
}

async fn list(view: TenantView) -> Result<Json<Value>, ApiError> {
    let pools = view.pools().await.map_err(engine_error)?;
    let (groups, out) = groups(&view).await;
    let pools: Vec<Shown> = pools.into_iter().map(|p| shown(p, &groups, &out)).collect();
    Ok(Json(json!({ "pools": pools })))
}

async fn show(view: TenantView, Path(name): Path<String>) -> Result<Json<Shown>, ApiError> {
    let name = pool_name(&name)?;
    let pool = view
        .pools()
        .await
        .map_err(engine_error)?
        .into_iter()
        .find(|p| p.name == name)
        .ok_or_else(|| {
            ApiError::Missing(format!(
                "no pool `{name}`; create it with PUT /api/v1/pools/{name}"
            ))
        })?;
    let (groups, out) = groups(&view).await;
    Ok(Json(shown(pool, &groups, &out)))
}

async fn put(
    view: TenantView,
    Path(name): Path<String>,
    body: Bytes,
) -> Result<(StatusCode, Json<Shown>), ApiError> {
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
    let (groups, out) = groups(&view).await;
    Ok((status, Json(shown(put.pool, &groups, &out))))
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
