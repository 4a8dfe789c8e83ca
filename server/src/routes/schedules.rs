//! `/api/v1/schedules`: the token's tenant's schedules. Like every API route, the tenant is
//! the bearer token's; a schedule of another tenant answers exactly like a missing one.

use axum::body::Bytes;
use axum::extract::{Path, Query};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use durable::model::{Millis, Schedule, ScheduleFields, ScheduleId, SchedulePatch};
use durable::schedules::next_fires;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::params::json_body;
use crate::error::{ApiError, engine_error};
use crate::state::ServerState;
use crate::tenant_view::TenantView;

/// How many fire times a schedule is shown with.
const NEXT_SHOWN: usize = 5;
/// The most schedules one page lists.
const MAX_PAGE: usize = 200;

/// The schedules routes.
pub fn router() -> Router<ServerState> {
    Router::new()
        .route("/schedules", post(create).get(list))
        .route("/schedules/{id}", get(show).patch(update).delete(remove))
        .route("/schedules/{id}/trigger", post(trigger))
        .route("/schedules/{id}/pause", post(pause))
        .route("/schedules/{id}/resume", post(resume))
}

/// A schedule with its next fire times, as every route answers it.
#[derive(Serialize)]
struct Shown {
    #[serde(flatten)]
    schedule: Schedule,
    /// The next fire times (none while paused).
    next: Vec<Millis>,
}

impl From<Schedule> for Shown {
    fn from(schedule: Schedule) -> Self {
        let next = next_fires(&schedule, NEXT_SHOWN);
        Shown { schedule, next }
    }
}

fn schedule_id(raw: &str) -> Result<ScheduleId, ApiError> {
    ScheduleId::parse(raw).map_err(|e| ApiError::BadRequest(e.to_string()))
}

fn fields(body: &Bytes) -> Result<ScheduleFields, ApiError> {
    json_body(body)
}

fn bad(e: durable::model::ScheduleError) -> ApiError {
    ApiError::BadRequest(e.to_string())
}

async fn create(view: TenantView, body: Bytes) -> Result<(StatusCode, Json<Shown>), ApiError> {
    let (id, spec) = fields(&body)?.create().map_err(bad)?;
    let schedule = view.create_schedule(id, spec).await.map_err(engine_error)?;
    Ok((StatusCode::CREATED, Json(schedule.into())))
}

/// `GET /schedules` query.
#[derive(Deserialize)]
struct ListParams {
    /// The id the page starts after.
    after: Option<String>,
    limit: Option<String>,
}

async fn list(view: TenantView, Query(params): Query<ListParams>) -> Result<Json<Value>, ApiError> {
    let after = params
        .after
        .filter(|a| !a.is_empty())
        .map(|a| schedule_id(&a))
        .transpose()?;
    let limit = match params.limit.filter(|l| !l.is_empty()) {
        None => MAX_PAGE,
        Some(raw) => raw
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=MAX_PAGE).contains(n))
            .ok_or_else(|| {
                ApiError::BadRequest(format!(
                    "limit `{raw}` is not a number from 1 to {MAX_PAGE}"
                ))
            })?,
    };
    let page = view
        .schedules(after.as_ref(), limit)
        .await
        .map_err(engine_error)?;
    let more = page.len() == limit;
    let after = page.last().filter(|_| more).map(|s| s.id.to_string());
    let schedules: Vec<Shown> = page.into_iter().map(Shown::from).collect();
    Ok(Json(
        serde_json::json!({ "schedules": schedules, "after": after }),
    ))
}

async fn show(view: TenantView, Path(id): Path<String>) -> Result<Json<Shown>, ApiError> {
    let id = schedule_id(&id)?;
    let schedule = view.schedule(&id).await.map_err(engine_error)?;
    Ok(Json(schedule.ok_or(ApiError::NotFound)?.into()))
}

async fn update(
    view: TenantView,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Json<Shown>, ApiError> {
    let id = schedule_id(&id)?;
    let fields = fields(&body)?;
    if let Some(other) = fields.id.as_deref().filter(|other| *other != id.as_str()) {
        return Err(ApiError::BadRequest(format!(
            "a schedule's id cannot change (`{id}` to `{other}`); create a new one and delete this one"
        )));
    }
    changed(&view, &id, &fields.patch().map_err(bad)?).await
}

async fn changed(
    view: &TenantView,
    id: &ScheduleId,
    patch: &SchedulePatch,
) -> Result<Json<Shown>, ApiError> {
    let schedule = view
        .update_schedule(id, patch)
        .await
        .map_err(engine_error)?;
    Ok(Json(schedule.ok_or(ApiError::NotFound)?.into()))
}

async fn pause(view: TenantView, Path(id): Path<String>) -> Result<Json<Shown>, ApiError> {
    changed(&view, &schedule_id(&id)?, &SchedulePatch::pausing(true)).await
}

async fn resume(view: TenantView, Path(id): Path<String>) -> Result<Json<Shown>, ApiError> {
    changed(&view, &schedule_id(&id)?, &SchedulePatch::pausing(false)).await
}

async fn remove(view: TenantView, Path(id): Path<String>) -> Result<StatusCode, ApiError> {
    let id = schedule_id(&id)?;
    match view.delete_schedule(&id).await.map_err(engine_error)? {
        true => Ok(StatusCode::NO_CONTENT),
        false => Err(ApiError::NotFound),
    }
}

async fn trigger(view: TenantView, Path(id): Path<String>) -> Result<Json<Value>, ApiError> {
    let id = schedule_id(&id)?;
    let tick = view.trigger_schedule(&id).await.map_err(engine_error)?;
    let tick = tick.ok_or(ApiError::NotFound)?;
    Ok(Json(serde_json::json!({ "tick": tick })))
}
