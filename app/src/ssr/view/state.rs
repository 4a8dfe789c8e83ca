//! What the server functions and routes share. The engine is in here, but only the view module
//! ([`super`]) can reach it: everything else gets runs through a [`super::SessionView`].

use std::sync::Arc;

use axum::extract::FromRef;
use durable::Engine;
use durable::model::{RunQuery, Scope};
use durable::store::{Accounts, StoreError};
use leptos::prelude::*;

use crate::AppError;
use crate::ssr::PasswordChecks;

/// What the server functions and routes share.
///
/// The engine is not public: a [`super::SessionView`] is the only way a server function reaches
/// runs, so none can read or act outside its session's scope by accident.
///
/// ```compile_fail,E0616
/// fn unscoped(state: &app::ssr::AppState) {
///     let _ = state.engine.store();
/// }
/// ```
#[derive(Clone)]
pub struct AppState {
    /// Leptos' own options (site root, addresses).
    pub leptos_options: LeptosOptions,
    /// Users and settings.
    pub accounts: Arc<dyn Accounts>,
    /// The few password checks that may run at once, shared by every login.
    pub passwords: Arc<PasswordChecks>,
    /// The engine: starts runs, owns the store. Reached only by the view module.
    pub(super) engine: Engine,
}

impl AppState {
    /// The dashboard's state, wired once by the server when it starts.
    pub fn new(leptos_options: LeptosOptions, engine: Engine, accounts: Arc<dyn Accounts>) -> Self {
        AppState {
            leptos_options,
            accounts,
            passwords: Arc::new(PasswordChecks::for_this_machine()),
            engine,
        }
    }

    /// What one request may carry (the server sizes its body limits by it).
    pub fn limits(&self) -> &durable::model::InputLimits {
        self.engine.limits()
    }

    /// Whether the store answers, for the health check: a one-row read whose row is dropped
    /// here, so nothing of any namespace leaves this module.
    pub async fn store_answers(&self) -> Result<(), StoreError> {
        let probe = RunQuery {
            limit: 1,
            ..RunQuery::default()
        };
        self.engine.store().list_runs(&Scope::All, &probe).await?;
        Ok(())
    }
}

impl FromRef<AppState> for LeptosOptions {
    fn from_ref(state: &AppState) -> Self {
        state.leptos_options.clone()
    }
}

/// The app state provided to every server function.
pub fn app_state() -> Result<AppState, AppError> {
    use_context::<AppState>().ok_or_else(|| {
        tracing::error!("AppState missing from the server function context");
        AppError::Internal
    })
}
