//! Exporting history: a run's whole history as one JSON document (`GET /api/v1/runs/{id}/history`,
//! a [`RunHistory`]; the dashboard's `/runs/{id}/history.json` for a session), and every run a
//! filter matches as NDJSON (`GET /api/v1/runs/export`), streamed a page at a time, so an export
//! of a million runs holds one page in memory.

use axum::Router;
use axum::body::{Body, Bytes};
use std::sync::Arc;

use app::ssr::{AppState, SessionView};
use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::header::{CONTENT_DISPOSITION, CONTENT_TYPE};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use durable::model::{MAX_PAGE_SIZE, RunDetail, RunHistory, RunQuery};
use tower_sessions::Session;

use super::params::{ListParams, run_id};
use crate::error::{ApiError, internal};
use crate::secret::now_ms;
use crate::state::ServerState;
use crate::tenant_view::TenantView;

/// The routes, under `/api/v1`.
pub fn router() -> Router<ServerState> {
    Router::new()
        .route("/runs/export", get(export_runs))
        .route("/runs/{id}/history", get(run_history))
}

/// `GET /runs/{id}/history`: the run and every checkpoint it recorded.
async fn run_history(
    view: TenantView,
    Path(id): Path<String>,
) -> Result<Json<RunHistory>, ApiError> {
    let id = run_id(&id)?;
    let detail = view.detail(&id).await.map_err(internal)?;
    Ok(Json(RunHistory::new(
        detail.ok_or(ApiError::NotFound)?,
        now_ms(),
    )))
}

/// `GET /runs/export`: every run the filters of `GET /runs` match (its `limit` and `cursor`
/// are not taken), newest first, one JSON run per line. A store error midway ends the stream
/// early, which the client sees as a cut response.
async fn export_runs(
    view: TenantView,
    Query(params): Query<ListParams>,
) -> Result<Response, ApiError> {
    let first = RunQuery {
        limit: MAX_PAGE_SIZE,
        cursor: None,
        ..params.query(view.limits())?
    };
    let view = Arc::new(view);
    let pages = futures::stream::try_unfold(Some(first), move |next| {
        let view = view.clone();
        async move {
            let Some(query) = next else {
                return Ok::<_, Box<dyn std::error::Error + Send + Sync>>(None);
            };
            let page = view.list_runs(&query).await?;
            let mut lines = Vec::new();
            for run in &page.runs {
                serde_json::to_writer(&mut lines, run)?;
                lines.push(b'\n');
            }
            let next = page.next_cursor.map(|cursor| RunQuery {
                cursor: Some(cursor),
                ..query
            });
            Ok(Some((Bytes::from(lines), next)))
        }
    });
    Ok((
        [
            (CONTENT_TYPE, "application/x-ndjson"),
            (CONTENT_DISPOSITION, "attachment; filename=\"runs.ndjson\""),
        ],
        Body::from_stream(pages),
    )
        .into_response())
}

/// `GET /runs/{id}/history.json` (the dashboard's, beside the run page): the run page's
/// download, for the logged-in user's tenant (every tenant's, for an operator).
pub async fn download_history(
    State(dashboard): State<AppState>,
    session: Session,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let unauthorized = || ApiError::Unauthorized("log in to export a run's history".into());
    let user = app::ssr::user_of(dashboard.accounts.as_ref(), &session)
        .await
        .map_err(internal)?
        .ok_or_else(unauthorized)?;
    let view = SessionView::of_user(&dashboard, user).map_err(|_| unauthorized())?;
    let id = run_id(&id)?;
    let run = view
        .get_run(&id)
        .await
        .map_err(internal)?
        .ok_or(ApiError::NotFound)?;
    let checkpoints = view.checkpoints(&id).await.map_err(internal)?;
    let disposition = format!("attachment; filename=\"{id}.history.json\"");
    Ok((
        [(CONTENT_DISPOSITION, disposition)],
        Json(RunHistory::new(RunDetail { run, checkpoints }, now_ms())),
    )
        .into_response())
}
