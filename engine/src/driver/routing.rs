//! Where a remote step or a workflow turn runs. One function decides it, before dispatch, for
//! every send (a step's first, its retries, a remote turn): the author's explicit choice in
//! code wins (a pool of the run's tenant, named by `StepOptions::pool` or by a worker's
//! `call.group`), then the first of the tenant's routing rules that matches, then the tenant's
//! own partition. The decision is kept on the step's
//! checkpoint ([`StepRoute`]; none for the tenant's own partition); a dispatch sent again
//! because it may have been lost goes where the first one went.

use crate::model::{
    Namespace, Partition, PoolName, RouteTarget, RoutedBy, RoutingRules, StepRoute,
};

/// Where one send goes: the partition whose token it is sent on, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Routed {
    /// The run's tenant's own partition, or one of its pools.
    pub partition: Partition,
    /// What is kept on the checkpoint: nothing when nothing chose (the tenant's own partition),
    /// so the write of every step no one routed stays as small as it was.
    pub route: Option<StepRoute>,
    /// The priority the matching rule gives, for a send whose code set none.
    pub priority: Option<i64>,
    /// The pools the matching rule falls back to, in order, while the first has no live
    /// worker (see [`fall_back`]).
    pub fallbacks: Vec<PoolName>,
}

/// The first of `fallbacks` (pools of `tenant`) to send a task of step `name` to, when its
/// routed partition has no live worker that can take it: a fallback is used only then, and
/// only one with such a worker (`live` says which token has one). `None`: keep the first.
pub(crate) async fn fall_back<F, Fut>(
    tenant: &Namespace,
    name: &str,
    fallbacks: &[PoolName],
    live: F,
) -> Option<PoolName>
where
    F: Fn(String) -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for pool in fallbacks {
        let partition = Partition::of_pool(tenant.clone(), pool.clone());
        if live(crate::transport::naming::partition_token(name, &partition)).await {
            return Some(pool.clone());
        }
    }
    None
}

/// Routes a send of a run of `tenant`, whose code chose pool `explicit` (if any), by the
/// tenant's `rules` (with their version) for `target`.
pub(crate) fn route(
    tenant: &Namespace,
    explicit: Option<&PoolName>,
    rules: Option<(&RoutingRules, u64)>,
    target: &RouteTarget<'_>,
) -> Routed {
    if explicit.is_none()
        && let Some((rules, version)) = rules
        && let Some((at, rule)) = rules.first_match(target)
    {
        let pool = rule.pool();
        return Routed {
            partition: match &pool {
                Some(pool) => Partition::of_pool(tenant.clone(), pool.clone()),
                None => Partition::of_tenant(tenant.clone()),
            },
            route: Some(StepRoute {
                pool,
                by: RoutedBy::Rule {
                    rule: u32::try_from(at).unwrap_or(u32::MAX),
                    version,
                },
                instead_of: None,
            }),
            priority: rule.priority,
            fallbacks: rule.fallback.clone(),
        };
    }
    match explicit {
        Some(pool) => Routed {
            partition: Partition::of_pool(tenant.clone(), pool.clone()),
            route: Some(StepRoute {
                pool: Some(pool.clone()),
                by: RoutedBy::Code,
                instead_of: None,
            }),
            priority: None,
            fallbacks: Vec::new(),
        },
        None => Routed {
            partition: Partition::of_tenant(tenant.clone()),
            route: None,
            priority: None,
            fallbacks: Vec::new(),
        },
    }
}

/// The pool a worker's `call.group` (wire §3.5) asks for, for a run of `tenant`. The wire's
/// group is a partition: the calling worker's own, so blank, `default` and the run's tenant mean
/// no choice at all (the tenant's routing decides), and `<tenant>.<pool>` names one of the
/// tenant's pools: the steps of a workflow turned on a pool's worker stay on that pool. Another
/// tenant's partition, or one that does not parse, is refused: the error names it.
pub(crate) fn explicit_pool(group: &str, tenant: &Namespace) -> Result<Option<PoolName>, String> {
    if group.is_empty() || group == Namespace::DEFAULT_NAME || group == tenant.as_str() {
        return Ok(None);
    }
    match Partition::parse(group) {
        Ok(partition) if partition.tenant() == tenant => Ok(partition.pool().cloned()),
        _ => Err(group.chars().take(80).collect()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns(raw: &str) -> Namespace {
        Namespace::parse(raw).expect("namespace")
    }

    fn pool(raw: &str) -> PoolName {
        PoolName::parse(raw).expect("pool")
    }

    #[test]
    fn the_code_s_pool_wins_else_the_tenant_s_partition() {
        let none = serde_json::Map::new();
        let target = RouteTarget {
            workflow: "w",
            step: Some("s"),
            tags: &[],
            attributes: &none,
            input: None,
        };
        let chosen = route(&ns("acme"), Some(&pool("gpu")), None, &target);
        assert_eq!(chosen.partition.to_string(), "acme.gpu");
        let kept = chosen.route.expect("a route");
        assert_eq!(kept.by, RoutedBy::Code);
        assert_eq!(kept.to_string(), "routed to gpu by the step's code");
        let default = route(&ns("acme"), None, None, &target);
        assert_eq!(default.partition, Partition::of_tenant(ns("acme")));
        assert_eq!(default.route, None);
    }

    #[test]
    fn the_first_matching_rule_routes_what_the_code_leaves_open() {
        let rules: RoutingRules = serde_json::from_value(serde_json::json!({"rules": [
            {"match": {"step": "blur"}, "pool": "gpu"},
            {"match": {}, "pool": "default"},
        ]}))
        .unwrap();
        let none = serde_json::Map::new();
        let at = |step| RouteTarget {
            workflow: "render",
            step: Some(step),
            tags: &[],
            attributes: &none,
            input: None,
        };
        let blur = route(&ns("acme"), None, Some((&rules, 7)), &at("blur"));
        assert_eq!(blur.partition.to_string(), "acme.gpu");
        assert_eq!(
            blur.route.as_ref().map(ToString::to_string).as_deref(),
            Some("routed to gpu by rule 1")
        );
        let other = route(&ns("acme"), None, Some((&rules, 7)), &at("crop"));
        assert_eq!(other.partition.to_string(), "acme");
        assert_eq!(
            other.route.map(|r| r.by),
            Some(RoutedBy::Rule {
                rule: 2,
                version: 7
            })
        );
        let coded = route(
            &ns("acme"),
            Some(&pool("cpu")),
            Some((&rules, 7)),
            &at("blur"),
        );
        assert_eq!(coded.partition.to_string(), "acme.cpu", "the code wins");
    }

    #[test]
    fn a_wire_group_names_a_pool_of_the_run_s_tenant_or_nothing() {
        let acme = ns("acme");
        for none in ["", "default", "acme"] {
            assert_eq!(explicit_pool(none, &acme), Ok(None), "{none:?}");
        }
        assert_eq!(explicit_pool("acme.gpu", &acme), Ok(Some(pool("gpu"))));
        for refused in ["globex", "globex.gpu", "acme.GPU", "acme.", "a:b"] {
            assert_eq!(
                explicit_pool(refused, &acme),
                Err(refused.to_owned()),
                "{refused:?}"
            );
        }
    }
}
