//! What every request handler can reach: the dashboard's shared state (which holds the engine),
//! the API token verifier, the shutdown signal and the live event hub.

use app::ssr::AppState;
use axum::extract::FromRef;
use durable::gateway::TokenSigner;
use leptos::prelude::LeptosOptions;
use tokio::sync::watch;

use crate::live;

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
