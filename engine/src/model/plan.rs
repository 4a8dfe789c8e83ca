//! A tenant's plan: the ceilings that keep one tenant's load from consuming another's capacity
//! (SPEC §8), its fair-share weight, and what it uses now. The same shape is stored, sent over
//! the API and edited in the dashboard.

use serde::{Deserialize, Serialize};

/// Ceilings and a weight; an unset field is unlimited (on the default plan) or the default
/// plan's (on a tenant's own).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    /// Runs started and not yet ended at once; more wait queued, and start by themselves when
    /// one ends.
    #[serde(default)]
    pub max_concurrent_runs: Option<u32>,
    /// Starts accepted per rolling minute; more are refused with a retry-after.
    #[serde(default)]
    pub starts_per_minute: Option<u32>,
    /// Runs accepted and not yet started; more starts are refused.
    #[serde(default)]
    pub max_queued_runs: Option<u32>,
    /// How deep children may nest (a top-level run is depth 0); a deeper child fails.
    #[serde(default)]
    pub max_nesting_depth: Option<u32>,
    /// The largest input or signal payload accepted, in bytes of JSON.
    #[serde(default)]
    pub max_payload_bytes: Option<u64>,
    /// The tenant's share of contended capacity relative to others (default 1).
    #[serde(default)]
    pub weight: Option<u32>,
    /// How many days a finished run is kept (with its checkpoints and its children) before it
    /// is deleted; unset keeps history forever.
    #[serde(default)]
    pub retention_days: Option<u32>,
    /// How many worker pools the tenant may define; unset allows [`DEFAULT_MAX_POOLS`]: every
    /// pool is read by every control plane's routing, so none is unbounded.
    #[serde(default)]
    pub max_pools: Option<u32>,
    /// How many routing rules the tenant's list may hold; unset allows [`DEFAULT_MAX_RULES`]:
    /// every send is matched against them.
    #[serde(default)]
    pub max_rules: Option<u32>,
    /// How many connections the tenant may keep; unset allows [`DEFAULT_MAX_CONNECTIONS`]:
    /// every control plane reads them with the tenant's routing definitions.
    #[serde(default)]
    pub max_connections: Option<u32>,
    /// The highest priority the tenant's steps may take among their step's waiting tasks
    /// (their code's or their routing rules'): a higher one is lowered to it. Unset: no cap.
    #[serde(default)]
    pub max_priority: Option<u32>,
}

/// The pools a tenant may define when no plan says.
pub const DEFAULT_MAX_POOLS: u32 = 50;

/// The routing rules a tenant's list may hold when no plan says.
pub const DEFAULT_MAX_RULES: u32 = 100;

/// The connections a tenant may keep when no plan says.
pub const DEFAULT_MAX_CONNECTIONS: u32 = 50;

/// The longest retention a plan may set: a century.
pub const MAX_RETENTION_DAYS: u32 = 36_500;

/// The largest weight a plan may set: enough for any split, small enough that the fair queue's
/// arithmetic never wraps.
pub const MAX_WEIGHT: u32 = 1000;

/// Why a plan was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// A weight of 0 or above [`MAX_WEIGHT`].
    #[error("`weight` must be between 1 and {MAX_WEIGHT} (or null for the default, 1)")]
    Weight,
    /// A rate of 0 would refuse every start; a ceiling of 0 concurrent runs is allowed (it
    /// pauses the tenant), a rate of 0 is not.
    #[error(
        "`starts_per_minute` must be at least 1 (or null for no limit); to pause a tenant, set `max_concurrent_runs` to 0"
    )]
    ZeroRate,
    /// A retention of 0 days or of more than [`MAX_RETENTION_DAYS`].
    #[error(
        "`retention_days` must be between 1 and {MAX_RETENTION_DAYS} (or null to keep history forever)"
    )]
    Retention,
}

impl Plan {
    /// Checks the values a person set.
    pub fn validate(&self) -> Result<(), PlanError> {
        if self.weight.is_some_and(|w| w == 0 || w > MAX_WEIGHT) {
            return Err(PlanError::Weight);
        }
        if self.starts_per_minute == Some(0) {
            return Err(PlanError::ZeroRate);
        }
        if self
            .retention_days
            .is_some_and(|d| d == 0 || d > MAX_RETENTION_DAYS)
        {
            return Err(PlanError::Retention);
        }
        Ok(())
    }

    /// This tenant's plan over `default`: what it leaves unset comes from the default.
    pub fn over(&self, default: &Plan) -> Plan {
        Plan {
            max_concurrent_runs: self.max_concurrent_runs.or(default.max_concurrent_runs),
            starts_per_minute: self.starts_per_minute.or(default.starts_per_minute),
            max_queued_runs: self.max_queued_runs.or(default.max_queued_runs),
            max_nesting_depth: self.max_nesting_depth.or(default.max_nesting_depth),
            max_payload_bytes: self.max_payload_bytes.or(default.max_payload_bytes),
            weight: self.weight.or(default.weight),
            retention_days: self.retention_days.or(default.retention_days),
            max_pools: self.max_pools.or(default.max_pools),
            max_rules: self.max_rules.or(default.max_rules),
            max_connections: self.max_connections.or(default.max_connections),
            max_priority: self.max_priority.or(default.max_priority),
        }
    }

    /// How many pools the tenant may define.
    pub fn pools_allowed(&self) -> usize {
        self.max_pools.unwrap_or(DEFAULT_MAX_POOLS) as usize
    }

    /// `priority` as the plan lets it be (see [`Plan::max_priority`]).
    pub fn clamp_priority(&self, priority: Option<i64>) -> Option<i64> {
        priority.map(|p| match self.max_priority {
            Some(max) => p.min(i64::from(max)),
            None => p,
        })
    }

    /// How many routing rules the tenant's list may hold.
    pub fn rules_allowed(&self) -> usize {
        self.max_rules.unwrap_or(DEFAULT_MAX_RULES) as usize
    }

    /// How many connections the tenant may keep.
    pub fn connections_allowed(&self) -> usize {
        self.max_connections.unwrap_or(DEFAULT_MAX_CONNECTIONS) as usize
    }
}

/// What a tenant uses now, beside its ceilings.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Runs started and not ended (counted against `max_concurrent_runs`).
    pub running: u64,
    /// Runs accepted and not yet started (counted against `max_queued_runs`).
    pub queued: u64,
    /// Runs created in the last minute (what `starts_per_minute` limits).
    pub started_last_minute: u64,
}

/// Which ceiling a start or a child ran into; its name is the plan field's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    /// `max_concurrent_runs`.
    MaxConcurrentRuns,
    /// `starts_per_minute`.
    StartsPerMinute,
    /// `max_queued_runs`.
    MaxQueuedRuns,
    /// `max_nesting_depth`.
    MaxNestingDepth,
    /// `max_payload_bytes`.
    MaxPayloadBytes,
}

impl Limit {
    /// The plan field's name.
    pub fn field(self) -> &'static str {
        match self {
            Limit::MaxConcurrentRuns => "max_concurrent_runs",
            Limit::StartsPerMinute => "starts_per_minute",
            Limit::MaxQueuedRuns => "max_queued_runs",
            Limit::MaxNestingDepth => "max_nesting_depth",
            Limit::MaxPayloadBytes => "max_payload_bytes",
        }
    }
}

impl std::fmt::Display for Limit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.field())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenant_plan_falls_back_to_the_default_field_by_field() {
        let default = Plan {
            max_concurrent_runs: Some(100),
            starts_per_minute: Some(600),
            ..Plan::default()
        };
        let own = Plan {
            max_concurrent_runs: Some(5),
            weight: Some(3),
            ..Plan::default()
        };
        let plan = own.over(&default);
        assert_eq!(plan.max_concurrent_runs, Some(5));
        assert_eq!(plan.starts_per_minute, Some(600));
        assert_eq!(plan.weight, Some(3));
        assert_eq!(plan.max_queued_runs, None);
    }

    #[test]
    fn nonsense_values_are_refused_with_the_fix() {
        let zero_weight = Plan {
            weight: Some(0),
            ..Plan::default()
        };
        assert_eq!(zero_weight.validate(), Err(PlanError::Weight));
        let zero_rate = Plan {
            starts_per_minute: Some(0),
            ..Plan::default()
        };
        assert!(
            zero_rate
                .validate()
                .unwrap_err()
                .to_string()
                .contains("max_concurrent_runs")
        );
        let unknown: Result<Plan, _> = serde_json::from_str(r#"{"max_runs": 3}"#);
        assert!(unknown.is_err());
    }
}
