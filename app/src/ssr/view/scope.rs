//! The rule that decides what a session user may see: its tenant's namespace, whatever it asks
//! for; an operator bound to no tenant, every namespace, or the one its `?ns=` filter names.
//! A pure function, so the dashboard's store view and its live event stream share it.

use durable::model::{Namespace, NamespaceError, Role, Scope};
use durable::store::User;

use crate::AppError;

/// Why a session user gets no view of the runs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ViewRefused {
    /// A viewer or admin without a tenant: only an operator may be bound to none (the CLI
    /// refuses to make such a user, so the row was edited by hand).
    #[error(
        "user `{0}` is not an operator but belongs to no tenant; give it a tenant or make it an operator"
    )]
    NoTenant(String),
    /// An operator's namespace filter does not name a namespace.
    #[error("namespace filter: {0}")]
    BadNarrowing(NamespaceError),
}

impl From<ViewRefused> for AppError {
    fn from(refused: ViewRefused) -> Self {
        match refused {
            ViewRefused::NoTenant(_) => {
                tracing::error!(error = %refused, "refused a dashboard view");
                AppError::Forbidden
            }
            ViewRefused::BadNarrowing(_) => AppError::Invalid(refused.to_string()),
        }
    }
}

/// What `user` may see, narrowed to `narrowing` (a `?ns=` filter; blank means none) only for an
/// operator bound to no tenant. A user with a tenant sees that tenant, whatever it asks for:
/// the narrowing can never widen or change its scope.
pub fn session_scope(user: &User, narrowing: Option<&str>) -> Result<Scope, ViewRefused> {
    let narrowing = narrowing.map(str::trim).filter(|ns| !ns.is_empty());
    match (&user.tenant, user.role, narrowing) {
        // An operator with a tenant (a row edited by hand) stays in it, too.
        (Some(tenant), _, _) => Ok(Scope::Only(tenant.clone())),
        (None, Role::Operator, None) => Ok(Scope::All),
        (None, Role::Operator, Some(ns)) => Namespace::parse(ns)
            .map(Scope::Only)
            .map_err(ViewRefused::BadNarrowing),
        (None, _, _) => Err(ViewRefused::NoTenant(user.email.clone())),
    }
}
