//! `POST /api/v1/events`: publishing an event to the token's tenant. It reaches the tenant's
//! runs waiting for it whose filters it passes, and starts the workflows its name triggers;
//! the answer says how many runs it reached and which it started (`202`). Published again
//! under its `id`, it reaches nothing new.

use axum::Json;
use axum::body::Bytes;
use axum::http::StatusCode;
use durable::model::{EventOutcome, PublishedEvent};

use super::params::json_body;
use crate::error::{ApiError, engine_error};
use crate::tenant_view::TenantView;

pub(super) async fn publish(
    view: TenantView,
    body: Bytes,
) -> Result<(StatusCode, Json<EventOutcome>), ApiError> {
    let event: PublishedEvent = json_body(&body)?;
    let outcome = view.publish(event).await.map_err(engine_error)?;
    Ok((StatusCode::ACCEPTED, Json(outcome)))
}
