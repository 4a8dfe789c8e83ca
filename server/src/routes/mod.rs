//! HTTP routes: the dashboard (Leptos pages and server functions, session-authenticated), its
//! live event stream, the JSON API under `/api/v1` (bearer tenant tokens) and `/healthz`.

mod api;
mod health;
pub mod live;
mod sse;

use anyhow::Context;
use app::ssr::AppState;
use app::{App, shell};
use axum::Router;
use axum::extract::FromRef;
use axum::middleware;
use axum::routing::get;
use durable::gateway::TokenSigner;
use leptos::prelude::*;
use leptos_axum::{LeptosRoutes, generate_route_list};
use tokio::sync::watch;
use tower_http::trace::TraceLayer;
use tower_sessions::SessionStore;
use tower_sessions::cookie::SameSite;
use tower_sessions::session_store::ExpiredDeletion;
use tower_sessions::{Expiry, SessionManagerLayer};
use tower_sessions_sqlx_store::sqlx::postgres::PgPoolOptions;
use tower_sessions_sqlx_store::sqlx::sqlite::SqlitePoolOptions;
use tower_sessions_sqlx_store::{PostgresStore as PostgresSessions, SqliteStore as SqliteSessions};

use crate::auth;

/// Everything a request handler can reach.
#[derive(Clone)]
pub struct ServerState {
    /// What the dashboard's server functions share.
    pub app: AppState,
    /// Verifies API tokens.
    pub signer: TokenSigner,
    /// Flips to `true` at shutdown, ending live streams so the server can stop.
    pub shutdown: watch::Receiver<bool>,
    /// Live tenant events, shared among every SSE client of a scope.
    pub live: live::LiveHub,
}

impl FromRef<ServerState> for LeptosOptions {
    fn from_ref(state: &ServerState) -> Self {
        state.app.leptos_options.clone()
    }
}

/// Dashboard sessions, stored in the same database as the runs.
pub enum Sessions {
    /// In the SQLite file.
    Sqlite(SessionManagerLayer<SqliteSessions>),
    /// In PostgreSQL, so any control plane behind a load balancer knows every session.
    Postgres(SessionManagerLayer<PostgresSessions>),
}

/// Sessions in the configured database, expiring after 12 idle hours; expired ones are
/// deleted every hour.
pub async fn session_layer(database_url: &str) -> anyhow::Result<Sessions> {
    if crate::roles::is_postgres(database_url) {
        let pool = PgPoolOptions::new()
            .max_connections(4)
            .connect(database_url)
            .await
            .context("opening the session store")?;
        let store = PostgresSessions::new(pool);
        store
            .migrate()
            .await
            .context("creating the session table")?;
        delete_expired(store.clone());
        return Ok(Sessions::Postgres(configure(store)));
    }
    let pool = SqlitePoolOptions::new()
        .max_connections(2)
        .connect(database_url)
        .await
        .context("opening the session store")?;
    let store = SqliteSessions::new(pool);
    store
        .migrate()
        .await
        .context("creating the session table")?;
    delete_expired(store.clone());
    Ok(Sessions::Sqlite(configure(store)))
}

/// Deletes expired sessions every hour, so the table holds live ones only.
fn delete_expired<S: ExpiredDeletion>(store: S) {
    tokio::spawn(async move {
        let mut every = tokio::time::interval(std::time::Duration::from_secs(3600));
        loop {
            every.tick().await;
            if let Err(e) = store.delete_expired().await {
                tracing::warn!(error = %e, "deleting expired sessions failed; trying again in an hour");
            }
        }
    });
}

fn configure<S: SessionStore>(store: S) -> SessionManagerLayer<S> {
    SessionManagerLayer::new(store)
        .with_name("durable_session")
        .with_http_only(true)
        .with_same_site(SameSite::Lax)
        // Saved on every request, so the 12 hours count from the last one, not from the login.
        .with_always_save(true)
        .with_secure(std::env::var("DURABLE_SECURE_COOKIES").is_ok_and(|v| v == "true"))
        .with_expiry(Expiry::OnInactivity(
            tower_sessions::cookie::time::Duration::hours(12),
        ))
}

/// The whole HTTP surface.
pub fn router(state: ServerState, sessions: Sessions) -> Router {
    match sessions {
        Sessions::Sqlite(layer) => router_with(state, layer),
        Sessions::Postgres(layer) => router_with(state, layer),
    }
}

fn router_with<S: SessionStore + Clone>(
    state: ServerState,
    sessions: SessionManagerLayer<S>,
) -> Router {
    let routes = generate_route_list(App);
    let app_state = state.app.clone();
    let context = move || provide_context(app_state.clone());
    let options = state.app.leptos_options.clone();
    let dashboard = Router::new()
        .leptos_routes_with_context(&state, routes, context.clone(), move || {
            shell(options.clone())
        })
        .route("/events", get(sse::dashboard_events))
        .fallback(leptos_axum::file_and_error_handler_with_context::<
            ServerState,
            _,
        >(context, shell))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            auth::require_login,
        ))
        .layer(middleware::from_fn(auth::same_origin))
        .layer(sessions);
    Router::new()
        .merge(dashboard)
        .nest("/api/v1", api::router())
        .route("/healthz", get(health::healthz))
        .with_state(state)
        .layer(TraceLayer::new_for_http())
}
