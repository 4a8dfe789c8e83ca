//! What request handlers can reach: the dashboard's shared state, the API's door to tenant
//! views, the API token verifier, the shutdown signal and the live event hub. Neither the
//! dashboard's state nor the API's door hands the engine out: runs are reached only through a
//! session's or a token's view. A handler takes only the parts it needs ([`FromRef`]).

use app::ssr::AppState;
use axum::extract::FromRef;
use durable::gateway::TokenSigner;
use leptos::prelude::LeptosOptions;
use tokio::sync::watch;

use crate::auth::ApiTokens;
use crate::live;
use crate::metrics::Metrics;
use crate::public_url::PublicUrl;
use crate::tenant_view::TenantViews;

/// Everything a request handler can reach.
#[derive(Clone)]
pub struct ServerState {
    /// What the dashboard's server functions share.
    pub app: AppState,
    /// The API's door to the engine: turns a verified token's tenant into its view.
    pub tenant_views: TenantViews,
    /// Verifies API tokens.
    pub signer: TokenSigner,
    /// Flips to `true` at shutdown, ending live streams so the server can stop.
    pub shutdown: Shutdown,
    /// Live tenant events, shared among every SSE client of a scope.
    pub live: live::LiveHub,
    /// Where browsers reach the dashboard, when configured: the CSRF check's origin.
    pub public_url: Option<PublicUrl>,
    /// What `/metrics` renders.
    pub metrics: Metrics,
}

/// Flips to `true` at shutdown, so long-lived responses (live streams) end and the server can
/// stop.
#[derive(Clone)]
pub struct Shutdown(pub watch::Receiver<bool>);

impl FromRef<ServerState> for LeptosOptions {
    fn from_ref(state: &ServerState) -> Self {
        state.app.leptos_options.clone()
    }
}

impl FromRef<ServerState> for AppState {
    fn from_ref(state: &ServerState) -> Self {
        state.app.clone()
    }
}

impl FromRef<ServerState> for live::LiveHub {
    fn from_ref(state: &ServerState) -> Self {
        state.live.clone()
    }
}

impl FromRef<ServerState> for Metrics {
    fn from_ref(state: &ServerState) -> Self {
        state.metrics.clone()
    }
}

impl FromRef<ServerState> for Shutdown {
    fn from_ref(state: &ServerState) -> Self {
        state.shutdown.clone()
    }
}

impl FromRef<ServerState> for TenantViews {
    fn from_ref(state: &ServerState) -> Self {
        state.tenant_views.clone()
    }
}

impl FromRef<ServerState> for ApiTokens {
    fn from_ref(state: &ServerState) -> Self {
        ApiTokens {
            accounts: state.app.accounts.clone(),
            signer: state.signer.clone(),
        }
    }
}
