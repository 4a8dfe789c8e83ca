//! Live tenant events over server-sent events. Each stream is scoped before it starts: to the
//! token's tenant (API) or the session user's tenant (dashboard); an operator sees every
//! namespace. Streams end when the server shuts down.

use std::convert::Infallible;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, KeepAliveStream, Sse};
use durable::model::{Role, Scope};
use futures::{Stream, StreamExt};
use serde_json::json;
use tokio::sync::broadcast::error::RecvError;
use tower_sessions::Session;

use super::ServerState;
use crate::auth::ApiTenant;
use crate::error::{ApiError, internal};

type EventStream = Sse<KeepAliveStream<BoxedEvents>>;
type BoxedEvents = std::pin::Pin<Box<dyn Stream<Item = Result<Event, Infallible>> + Send>>;

/// `GET /api/v1/events`: the token tenant's events.
pub async fn api_events(
    State(state): State<ServerState>,
    ApiTenant(tenant): ApiTenant,
) -> Result<EventStream, ApiError> {
    stream(&state, Scope::Only(tenant)).await
}

/// `GET /events`: the dashboard's feed, scoped to the logged-in user.
pub async fn dashboard_events(
    State(state): State<ServerState>,
    session: Session,
) -> Result<EventStream, ApiError> {
    let unauthorized = || ApiError::Unauthorized("log in to watch live events".into());
    let user = app::ssr::user_of(state.app.accounts.as_ref(), &session)
        .await
        .map_err(internal)?
        .ok_or_else(unauthorized)?;
    let scope = match (user.tenant, user.role) {
        (Some(tenant), _) => Scope::Only(tenant),
        (None, Role::Operator) => Scope::All,
        (None, _) => return Err(unauthorized()),
    };
    stream(&state, scope).await
}

async fn stream(state: &ServerState, scope: Scope) -> Result<EventStream, ApiError> {
    let frames = state.live.subscribe(scope).await.map_err(internal)?;
    let mut shutdown = state.shutdown.clone();
    let ended = async move {
        let _ = shutdown.wait_for(|stopped| *stopped).await;
    };
    let events = futures::stream::unfold(frames, |mut frames| async move {
        let event = match frames.recv().await {
            Ok(frame) => Event::default().data(&*frame),
            // This client fell behind: tell it to re-read instead of trusting its copy.
            Err(RecvError::Lagged(n)) => Event::default().data(json!({ "resync": n }).to_string()),
            Err(RecvError::Closed) => return None,
        };
        Some((Ok(event), frames))
    })
    .take_until(ended);
    let events: BoxedEvents = Box::pin(events);
    Ok(Sse::new(events).keep_alive(KeepAlive::default()))
}
