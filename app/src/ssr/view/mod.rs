//! The dashboard's one door to the runs: a [`SessionView`], built in exactly one place
//! ([`SessionView::build`]) from the session's user, holding the store view of its scope and
//! the engine, both private. Pages read, act, start runs and look up workers through it; the
//! scope is fixed when it is built, so no page can widen it, and no page can reach the engine.

mod connections;
mod plans;
mod pools;
mod reads;
mod schedules;
mod scope;
mod start;
mod state;
#[cfg(test)]
mod tests;
mod verbs;
mod workers;

use durable::Engine;
use durable::model::{Namespace, Role, Scope};
use durable::store::{ScopedStore, User};

pub use scope::{ViewRefused, session_scope};
pub use state::{AppState, app_state};

use super::session_user;
use crate::AppError;

/// What a server function needs the session's user to be allowed, checked before its view is
/// built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    /// Reading runs: any logged-in user.
    Read,
    /// Acting on runs (control verbs, starts): admins and operators; a viewer is refused.
    Act,
    /// The operator screen: operators only.
    Operate,
}

impl Need {
    fn allows(self, role: Role) -> bool {
        match self {
            Need::Read => true,
            Need::Act => role.can_act(),
            Need::Operate => role == Role::Operator,
        }
    }
}

/// The runs one dashboard request may reach: its session user's, read through a store view of
/// the user's scope and acted on with that scope fixed.
///
/// A user with a tenant sees that tenant only; an operator bound to no tenant sees every
/// namespace, or the one its `?ns=` filter narrows to. Another tenant's run answers exactly
/// like a missing one, to every read and verb.
#[derive(Clone)]
pub struct SessionView {
    user: User,
    reads: ScopedStore,
    engine: Engine,
}

impl SessionView {
    /// The view of this request's session user, if its role allows `need`
    /// ([`AppError::Forbidden`] otherwise; [`AppError::Unauthorized`] without a session).
    /// `narrowing` is the `?ns=` filter, honoured for an operator bound to no tenant only.
    pub async fn open(need: Need, narrowing: Option<&str>) -> Result<Self, AppError> {
        let state = app_state()?;
        let user = session_user().await?;
        if !need.allows(user.role) {
            return Err(AppError::Forbidden);
        }
        Self::build(&state, user, narrowing)
    }

    /// The view of `user` (a session's, read by a plain handler rather than a server function),
    /// scoped as [`SessionView::open`] scopes it.
    pub fn of_user(state: &AppState, user: User) -> Result<Self, AppError> {
        Self::build(state, user, None)
    }

    /// The only place a dashboard store view is built: the scope comes from `user` (the
    /// session's) by [`session_scope`], never from the request.
    fn build(state: &AppState, user: User, narrowing: Option<&str>) -> Result<Self, AppError> {
        let store = state.engine.store().clone();
        let reads = match session_scope(&user, narrowing)? {
            Scope::Only(namespace) => ScopedStore::new(store, namespace),
            Scope::All => ScopedStore::operator(store),
        };
        Ok(SessionView {
            user,
            reads,
            engine: state.engine.clone(),
        })
    }

    /// The session's user, for its role, its email in logs, and what the pages show of it.
    pub fn user(&self) -> &User {
        &self.user
    }

    /// The tenant whose own objects (schedules, pools) this session manages: its user's, or for
    /// an operator bound to no tenant the engine's own namespace (where its starts go too).
    pub fn own_tenant(&self) -> Namespace {
        self.user
            .tenant
            .clone()
            .unwrap_or_else(|| self.engine.stamp_namespace())
    }

    /// What this view can see.
    pub fn scope(&self) -> &Scope {
        self.reads.scope()
    }
}
