//! The JSON API for programs: `/api/v1/runs`, `/api/v1/schedules` and `/api/v1/events`. The tenant is the one in the
//! bearer token; any tenant or namespace named in a query or body is not honoured. Every handler
//! reaches runs through the [`TenantView`] extracted from that token, and nothing else.

use axum::body::Bytes;
use axum::extract::DefaultBodyLimit;
use axum::extract::{Path, Query};
use axum::http::StatusCode;
use axum::middleware;
use axum::routing::{get, post};
use axum::{Json, Router};
use durable::model::{
    AttributeFilter, Cursor, InputLimits, Millis, RunDetail, RunId, RunPage, RunQuery, RunStatus,
};
use durable::store::SignalSent;
use durable::{Control, StartRun};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use tower_http::limit::RequestBodyLimitLayer;

use super::sse;
use super::tenant::TenantView;
use crate::error::{ApiError, engine_error, internal, json_errors, store_error};
use crate::state::ServerState;

/// The API's routes. A body may be `body_limit` bytes at most (past it: `413`), and every
/// error, the extractors' and the router's own included, answers in the JSON error shape.
pub fn router(body_limit: usize) -> Router<ServerState> {
    Router::new()
        .route("/runs", post(start_run).get(list_runs))
        .route("/runs/{id}", get(get_run))
        .merge(super::export::router())
        .route("/runs/{id}/signal", post(signal_run))
        .route("/runs/{id}/cancel", post(cancel_run))
        .route("/runs/{id}/retry", post(retry_run))
        .route("/runs/{id}/retry-with-input", post(retry_with_input))
        .route("/runs/{id}/continue", post(continue_run))
        .route("/runs/{id}/redispatch", post(redispatch_run))
        .route(
            "/events",
            get(sse::api_events).post(super::publish::publish),
        )
        .merge(super::handlers::router())
        .merge(super::schedules::router())
        .merge(super::plans::router())
        .merge(super::tokens::router())
        .fallback(no_such_route)
        // A body declared larger is refused before it is read; one that runs on past the
        // limit is cut there.
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(RequestBodyLimitLayer::new(body_limit))
        .layer(middleware::map_response(json_errors))
}

/// An API path that names no route.
async fn no_such_route(uri: axum::http::Uri) -> (StatusCode, Json<Value>) {
    (
        StatusCode::NOT_FOUND,
        Json(serde_json::json!({ "error": {
            "code": "not-found",
            "message": format!("no API route at `{}`; the routes are under /api/v1/runs, /api/v1/schedules, /api/v1/events and /api/v1/tenants", uri.path()),
        }})),
    )
}

/// A run id from the URL, or a `400` saying what is wrong with it.
pub(super) fn run_id(raw: &str) -> Result<RunId, ApiError> {
    RunId::parse(raw).map_err(|e| ApiError::BadRequest(e.to_string()))
}

/// Parses a JSON body with a message that says what is wrong and where.
pub(super) fn json_body<T: DeserializeOwned>(body: &Bytes) -> Result<T, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::BadRequest(format!("invalid JSON body: {e}")))
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

/// `GET /runs` query (and `GET /runs/export`'s, without `limit` and `cursor`). Unknown
/// parameters (a `namespace`, say) are ignored: the token decides.
#[derive(Debug, Deserialize)]
pub(super) struct ListParams {
    status: Option<String>,
    workflow: Option<String>,
    tag: Option<String>,
    /// `key=value`.
    attr: Option<String>,
    /// Epoch milliseconds, inclusive.
    #[serde(rename = "createdFrom")]
    created_from: Option<Millis>,
    /// Epoch milliseconds, exclusive.
    #[serde(rename = "createdUntil")]
    created_until: Option<Millis>,
    /// A run id: that run and, for a root, every run started under it.
    id: Option<String>,
    limit: Option<String>,
    cursor: Option<String>,
}

impl ListParams {
    /// The list query these ask for, checked against `limits`.
    pub(super) fn query(self, limits: &InputLimits) -> Result<RunQuery, ApiError> {
        let bad = |e: &dyn std::fmt::Display| ApiError::BadRequest(e.to_string());
        let status = self
            .status
            .filter(|s| !s.is_empty())
            .map(|s| s.parse::<RunStatus>())
            .transpose()
            .map_err(|e| bad(&e))?;
        let limit = match self.limit.filter(|s| !s.is_empty()) {
            None => 0,
            Some(raw) => {
                let n = raw.parse::<u32>().map_err(|_| {
                    ApiError::BadRequest(format!("limit `{raw}` is not a number: use 1 to 200"))
                })?;
                RunQuery::check_limit(n).map_err(|e| bad(&e))?
            }
        };
        let cursor = self
            .cursor
            .filter(|s| !s.is_empty())
            .map(|c| Cursor::parse(&c))
            .transpose()
            .map_err(|e| bad(&e))?;
        let query = RunQuery {
            status,
            workflow: self.workflow.filter(|s| !s.is_empty()),
            tag: self.tag.filter(|s| !s.is_empty()),
            attribute: self
                .attr
                .filter(|s| !s.is_empty())
                .map(|raw| AttributeFilter::parse(&raw))
                .transpose()
                .map_err(|e| bad(&e))?,
            created_from: self.created_from,
            created_until: self.created_until,
            family: self
                .id
                .filter(|s| !s.is_empty())
                .map(|raw| RunId::parse(&raw))
                .transpose()
                .map_err(|e| bad(&e))?,
            limit,
            cursor,
        };
        query.check(limits).map_err(|e| bad(&e))?;
        Ok(query)
    }
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
