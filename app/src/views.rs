//! View types that only the dashboard needs; run data itself uses `durable::model` unchanged.

use durable::model::{Facets, Namespace, Role, RunPage};
use serde::{Deserialize, Serialize};

/// The logged-in user, as the pages show it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Me {
    /// Login email.
    pub email: String,
    /// The tenant; `None` for an operator.
    pub tenant: Option<Namespace>,
    /// Role.
    pub role: Role,
}

impl Me {
    /// Whether this user sees every namespace.
    pub fn is_operator(&self) -> bool {
        self.role == Role::Operator
    }
}

/// Everything the runs list shows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunsView {
    /// The page of runs.
    pub page: RunPage,
    /// Runs per status, workflow and tag in the reader's scope, for the chips.
    pub facets: Facets,
    /// Workflows that can be started.
    pub workflows: Vec<String>,
}
