//! Where a step or a remote turn was sent, and what decided it: kept on its checkpoint, shown on
//! the run's page ("routed to gpu by rule 2"), and read again by a dispatch sent again, which
//! goes where the first one went.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::PoolName;

/// A routing decision (see [`RoutedBy`] for who makes it, in that order).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepRoute {
    /// The pool it was sent to; `None` for the tenant's own partition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<PoolName>,
    /// What chose it.
    #[serde(flatten)]
    pub by: RoutedBy,
    /// The pool chosen first, when it had no live worker and a fallback was taken instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instead_of: Option<PoolName>,
}

/// Who decided a route: the author's explicit choice in code wins, then the tenant's routing
/// rules, then the tenant's own partition.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "by", rename_all = "snake_case")]
pub enum RoutedBy {
    /// The step's code named the pool (`StepOptions::pool`, or the wire's `call.group`).
    Code,
    /// A routing rule of the tenant's list.
    Rule {
        /// Its position in the list, from 1 as people count.
        rule: u32,
        /// The version of the list it belonged to.
        version: u64,
    },
    /// Nothing chose: the tenant's own partition.
    Default,
}

/// Where a send would go under a tenant's routing now: what the "where would this step go?"
/// tester answers, without sending anything.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoutePreview {
    /// The partition it would be sent on (`acme.gpu`).
    pub partition: String,
    /// Why: the route a checkpoint would keep (by default when nothing chose).
    pub route: StepRoute,
    /// The pools tried in order while the first has no live worker.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fallback: Vec<PoolName>,
    /// The priority the matching rule gives.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i64>,
}

impl StepRoute {
    /// The tenant's own partition, nothing having chosen another.
    pub fn by_default() -> Self {
        StepRoute {
            pool: None,
            by: RoutedBy::Default,
            instead_of: None,
        }
    }
}

impl fmt::Display for StepRoute {
    /// `routed to gpu by rule 2`, `routed to the tenant's partition by default`, with
    /// `(gpu-a had no live worker)` when a fallback was taken.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.pool {
            Some(pool) => write!(f, "routed to {pool}")?,
            None => f.write_str("routed to the tenant's partition")?,
        }
        match &self.by {
            RoutedBy::Code => f.write_str(" by the step's code")?,
            RoutedBy::Rule { rule, .. } => write!(f, " by rule {rule}")?,
            RoutedBy::Default => f.write_str(" by default")?,
        }
        if let Some(first) = &self.instead_of {
            write!(f, " ({first} had no live worker)")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(name: &str) -> PoolName {
        PoolName::parse(name).expect("pool")
    }

    #[test]
    fn a_route_reads_as_a_sentence_and_keeps_its_shape_in_json() {
        let route = StepRoute {
            pool: Some(pool("gpu")),
            by: RoutedBy::Rule {
                rule: 2,
                version: 7,
            },
            instead_of: Some(pool("gpu-a")),
        };
        assert_eq!(
            route.to_string(),
            "routed to gpu by rule 2 (gpu-a had no live worker)"
        );
        let json = serde_json::to_value(&route).expect("json");
        assert_eq!(
            json,
            serde_json::json!({"pool": "gpu", "by": "rule", "rule": 2, "version": 7, "instead_of": "gpu-a"})
        );
        assert_eq!(
            serde_json::from_value::<StepRoute>(json).expect("back"),
            route
        );
        let default = StepRoute::by_default();
        assert_eq!(
            default.to_string(),
            "routed to the tenant's partition by default"
        );
        assert_eq!(
            serde_json::to_value(&default).expect("json"),
            serde_json::json!({"by": "default"})
        );
    }
}
