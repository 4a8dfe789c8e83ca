//! `/api/v1/runs/{id}/query/{name}` and `/update/{name}`: asking a run's workflow through the
//! handlers its body registers. The argument is the request body (empty means `null`); the
//! answer is `{"result": …}`. An update may carry an `Idempotency-Key` header: repeated under
//! the same key it returns the first reply, and the run receives it once.

use axum::body::Bytes;
use axum::extract::Path;
use axum::http::HeaderMap;
use axum::routing::post;
use axum::{Json, Router};
use durable::UpdateOutcome;
use durable::model::{RunId, UpdateId};
use serde_json::{Value, json};

use super::params::json_body;
use crate::error::{ApiError, engine_error};
use crate::state::ServerState;
use crate::tenant_view::TenantView;

/// The header an update's id comes in.
const UPDATE_ID_HEADER: &str = "idempotency-key";

/// The query and update routes.
pub fn router() -> Router<ServerState> {
    Router::new()
        .route("/runs/{id}/query/{name}", post(query))
        .route("/runs/{id}/update/{name}", post(update))
}

async fn query(
    view: TenantView,
    Path((id, name)): Path<(String, String)>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let id = RunId::parse(&id).map_err(|e| ApiError::BadRequest(e.to_string()))?;
    let argument = argument(&body)?;
    let result = view
        .query(&id, &name, argument)
        .await
        .map_err(engine_error)?
        .ok_or(ApiError::NotFound)?;
    Ok(Json(json!({ "result": result })))
}

async fn update(
    view: TenantView,
    Path((id, name)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let id = RunId::parse(&id).map_err(|e| ApiError::BadRequest(e.to_string()))?;
    let update_id = match headers.get(UPDATE_ID_HEADER) {
        None => None,
        Some(raw) => {
            let raw = raw.to_str().map_err(|_| {
                ApiError::BadRequest("the Idempotency-Key header must be plain ASCII".to_owned())
            })?;
            Some(UpdateId::parse(raw).map_err(|e| ApiError::BadRequest(e.to_string()))?)
        }
    };
    let argument = argument(&body)?;
    match view
        .update(&id, &name, argument, update_id)
        .await
        .map_err(engine_error)?
    {
        UpdateOutcome::Replied(result) => Ok(Json(json!({ "result": result }))),
        UpdateOutcome::NotFound => Err(ApiError::NotFound),
        UpdateOutcome::RunFinished(run) => Err(ApiError::Conflict(format!(
            "run {} already ended ({}); a finished run takes no updates (queries still answer)",
            run.id, run.status
        ))),
    }
}

/// The body as the handler's argument: `null` when empty.
fn argument(body: &Bytes) -> Result<Value, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        Ok(Value::Null)
    } else {
        json_body(body)
    }
}
