//! Live tenant events over server-sent events. Each stream is scoped before it starts: to the
//! token's tenant (API) or the session user's tenant (dashboard); an operator sees every
//! namespace. Streams end when the server shuts down, and a dashboard stream also when its
//! session stops being valid (logged out, here or everywhere; expired; the user deleted or
//! moved): it is read again every [`SESSION_RECHECK`].

use std::convert::Infallible;
use std::time::Duration;

use app::ssr::AppState;
use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, KeepAliveStream, Sse};
use durable::model::Scope;
use futures::{Stream, StreamExt};
use serde_json::json;
use tokio::sync::broadcast::error::RecvError;
use tower_sessions::Session;

use crate::error::{ApiError, internal};
use crate::live::LiveHub;
use crate::metrics::SseClient;
use crate::state::Shutdown;
use crate::tenant_view::TenantView;

/// How often a dashboard stream checks that its session still holds: the longest a revoked
/// session keeps receiving events.
const SESSION_RECHECK: Duration = Duration::from_secs(5);

type EventStream = Sse<KeepAliveStream<BoxedEvents>>;
type BoxedEvents = std::pin::Pin<Box<dyn Stream<Item = Result<Event, Infallible>> + Send>>;

/// `GET /api/v1/events`: the token tenant's events.
pub async fn api_events(
    view: TenantView,
    State(live): State<LiveHub>,
    State(shutdown): State<Shutdown>,
) -> Result<EventStream, ApiError> {
    // A token does not expire: the stream lasts until the server stops.
    let scope = view.scope().clone();
    stream(&live, shutdown, scope, std::future::pending()).await
}

/// `GET /events`: the dashboard's feed, scoped to the logged-in user.
pub async fn dashboard_events(
    State(dashboard): State<AppState>,
    State(live): State<LiveHub>,
    State(shutdown): State<Shutdown>,
    session: Session,
) -> Result<EventStream, ApiError> {
    let unauthorized = || ApiError::Unauthorized("log in to watch live events".into());
    let user = app::ssr::user_of(dashboard.accounts.as_ref(), &session)
        .await
        .map_err(internal)?
        .ok_or_else(unauthorized)?;
    // The same rule as the dashboard's store view: the user's tenant, or every namespace for
    // an operator bound to none.
    let scope = app::ssr::session_scope(&user, None).map_err(|_| unauthorized())?;
    let accounts = dashboard.accounts.clone();
    let revoked = async move {
        loop {
            tokio::time::sleep(SESSION_RECHECK).await;
            // Read afresh: a session logged out or expired since is gone from the store.
            if let Err(e) = session.load().await {
                tracing::warn!(error = %e, "could not re-read a live stream's session");
                continue;
            }
            match app::ssr::user_of(accounts.as_ref(), &session).await {
                Ok(Some(now)) if now.tenant == user.tenant && now.role == user.role => {}
                Ok(_) => return,
                // Unreadable for now: keep the stream and look again.
                Err(e) => tracing::warn!(error = ?e, "could not re-check a live stream's session"),
            }
        }
    };
    stream(&live, shutdown, scope, revoked).await
}

async fn stream(
    live: &LiveHub,
    Shutdown(mut shutdown): Shutdown,
    scope: Scope,
    revoked: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<EventStream, ApiError> {
    let frames = live.subscribe(scope).await.map_err(internal)?;
    let ended = async move {
        tokio::select! {
            _ = shutdown.wait_for(|stopped| *stopped) => {}
            () = revoked => {}
        }
    };
    let client = SseClient::open();
    let events = futures::stream::unfold((frames, client), |(mut frames, client)| async move {
        let event = match frames.recv().await {
            Ok(frame) => Event::default().data(&*frame),
            // This client fell behind: tell it to re-read instead of trusting its copy.
            Err(RecvError::Lagged(n)) => Event::default().data(json!({ "resync": n }).to_string()),
            Err(RecvError::Closed) => return None,
        };
        Some((Ok(event), (frames, client)))
    })
    .take_until(ended);
    let events: BoxedEvents = Box::pin(events);
    Ok(Sse::new(events).keep_alive(KeepAlive::default()))
}
