//! `/api/v1/runs`: start, list, read and act on the token tenant's runs.

use axum::body::Bytes;
use axum::extract::{Path, Query};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use durable::model::{RunDetail, RunId, RunPage};
use durable::store::SignalSent;
use durable::{Control, StartRun};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::params::{ListParams, json_body, run_id};
use crate::error::{ApiError, engine_error, internal, store_error};
use crate::state::ServerState;
use crate::tenant_view::TenantView;

/// The routes of runs.
pub(super) fn router() -> Router<ServerState> {
    Router::new()
        .route("/runs", post(start_run).get(list_runs))
        .route("/runs/{id}", get(get_run))
        .route("/runs/{id}/signal", post(signal_run))
        .route("/runs/{id}/cancel", post(cancel_run))
        .route("/runs/{id}/retry", post(retry_run))
        .route("/runs/{id}/retry-with-input", post(retry_with_input))
        .route("/runs/{id}/continue", post(continue_run))
        .route("/runs/{id}/redispatch", post(redispatch_run))
}

/// `POST /runs` body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct StartBody {
    workflow: String,
    #[serde(default)]
    input: Value,
    #[serde(default)]
    tags: Vec<String>,
    #[serde(default, rename = "searchAttributes")]
    search_attributes: Map<String, Value>,
    /// Signal-with-start: send this signal to the run `id`, starting it first if it does not
    /// exist.
    signal: Option<SignalBody>,
    /// How long the run may take (`30s`, `15m`, `2h`): past it, it fails with `run_timeout`.
    timeout: Option<String>,
    /// An idempotency key: a second start with the same id is refused, not duplicated.
    #[serde(default)]
    id: Option<RunId>,
}

async fn start_run(
    view: TenantView,
    body: Bytes,
) -> Result<(StatusCode, Json<durable::model::Run>), ApiError> {
    let body: StartBody = json_body(&body)?;
    // The view stamps the token's tenant.
    let timeout = match &body.timeout {
        Some(raw) => StartRun::parse_timeout(raw).map_err(engine_error)?,
        None => None,
    };
    let start = StartRun {
        workflow: body.workflow,
        timeout,
        input: body.input,
        id: body.id,
        tags: body.tags,
        search_attributes: body.search_attributes,
        ..StartRun::default()
    };
    let Some(signal) = body.signal else {
        let run = view.start_run(start).await.map_err(engine_error)?;
        return Ok((StatusCode::CREATED, Json(run)));
    };
    // Signal-with-start: `201` when it started the run, `200` when the run was there.
    let (run, started) = view
        .signal_with_start(start, signal.name.trim(), signal.payload)
        .await
        .map_err(engine_error)?;
    let status = if started {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(run)))
}

async fn list_runs(
    view: TenantView,
    Query(params): Query<ListParams>,
) -> Result<Json<RunPage>, ApiError> {
    let query = params.query(view.limits())?;
    let page = view.list_runs(&query).await.map_err(store_error)?;
    Ok(Json(page))
}

async fn get_run(view: TenantView, Path(id): Path<String>) -> Result<Json<RunDetail>, ApiError> {
    let id = run_id(&id)?;
    let detail = view.detail(&id).await.map_err(internal)?;
    Ok(Json(detail.ok_or(ApiError::NotFound)?))
}

/// `POST /runs/{id}/signal` body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SignalBody {
    name: String,
    #[serde(default)]
    payload: Value,
}

async fn signal_run(
    view: TenantView,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Json<durable::model::Run>, ApiError> {
    let id = run_id(&id)?;
    let body: SignalBody = json_body(&body)?;
    let name = body.name.trim();
    match view
        .signal(&id, name, body.payload)
        .await
        .map_err(engine_error)?
    {
        SignalSent::Delivered(run) => Ok(Json(run)),
        SignalSent::NotFound => Err(ApiError::NotFound),
        SignalSent::RunFinished(run) => Err(ApiError::Conflict(format!(
            "run {} already ended ({}); a finished run takes no signals",
            run.id, run.status
        ))),
    }
}

/// Maps a control verb's outcome onto the API: the run, `404`, or `409` naming its status.
fn control(outcome: Control, verb: &str) -> Result<Json<durable::model::Run>, ApiError> {
    match outcome {
        Control::Done(run) => Ok(Json(run)),
        Control::NotFound => Err(ApiError::NotFound),
        Control::WrongStatus(run) => Err(ApiError::Conflict(format!(
            "cannot {verb} run {}: it is {}",
            run.id, run.status
        ))),
    }
}

/// `POST /runs/{id}/cancel` body, optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct CancelBody {
    /// Run the compensations of the run's completed steps, newest first.
    #[serde(default)]
    compensate: bool,
}

async fn cancel_run(
    view: TenantView,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Json<durable::model::Run>, ApiError> {
    let id = run_id(&id)?;
    let body: CancelBody = if body.iter().all(u8::is_ascii_whitespace) {
        CancelBody::default()
    } else {
        json_body(&body)?
    };
    let outcome = if body.compensate {
        view.cancel_compensating(&id).await
    } else {
        view.cancel(&id).await
    };
    control(outcome.map_err(engine_error)?, "cancel")
}

async fn retry_run(
    view: TenantView,
    Path(id): Path<String>,
) -> Result<Json<durable::model::Run>, ApiError> {
    let id = run_id(&id)?;
    let outcome = view.retry(&id).await;
    control(
        outcome.map_err(internal)?,
        "retry (only failed or dead runs are)",
    )
}

async fn continue_run(
    view: TenantView,
    Path(id): Path<String>,
) -> Result<Json<durable::model::Run>, ApiError> {
    let id = run_id(&id)?;
    let outcome = view.continue_run(&id).await;
    control(
        outcome.map_err(internal)?,
        "continue (only blocked runs can be)",
    )
}

async fn redispatch_run(view: TenantView, Path(id): Path<String>) -> Result<Json<Value>, ApiError> {
    let id = run_id(&id)?;
    let (outcome, steps) = view.redispatch(&id).await.map_err(internal)?;
    let Json(run) = control(outcome, "redispatch (it waits on no remote step)")?;
    Ok(Json(
        serde_json::json!({ "run": run, "redispatched": steps }),
    ))
}

/// `POST /runs/{id}/retry-with-input` body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RetryWithInputBody {
    input: Value,
}

async fn retry_with_input(
    view: TenantView,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<(StatusCode, Json<durable::model::Run>), ApiError> {
    let id = run_id(&id)?;
    let body: RetryWithInputBody = json_body(&body)?;
    let outcome = view
        .retry_with_input(&id, body.input)
        .await
        .map_err(engine_error)?;
    control(outcome, "retry").map(|run| (StatusCode::CREATED, run))
}
