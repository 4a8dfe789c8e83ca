//! A tenant's routing rules: where its steps and workflow turns run when their code does not
//! say. One ordered list per tenant, the first rule that matches wins, and the last rule must
//! match everything (a catch-all), so every send has an answer the tenant wrote down. A rule's
//! action names a pool of the tenant's (or `default`, its own partition) and, optionally,
//! fallback pools used only while the first has no live worker, and a priority.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::PoolName;

/// The word a rule uses for the tenant's own partition.
pub const DEFAULT_POOL: &str = "default";

/// A tenant's rules, in order.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoutingRules {
    /// First match wins; the last matches everything.
    pub rules: Vec<Rule>,
}

/// One rule: what it matches, and where what it matches goes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// What it matches; empty matches everything.
    #[serde(rename = "match", default)]
    pub matches: RuleMatch,
    /// The pool it sends to, or `default` for the tenant's own partition.
    pub pool: String,
    /// Pools tried in order while the pool has no live worker.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fallback: Vec<PoolName>,
    /// The priority of what it sends among its step's waiting tasks (clamped by the plan).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i64>,
}

/// What a rule matches: every field given must hold (absent ones hold always).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleMatch {
    /// The run's workflow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow: Option<String>,
    /// The step's name; a rule naming a step never matches a workflow turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
    /// A tag the run carries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    /// Search attributes of the run, each equal to the value given.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub attributes: BTreeMap<String, Value>,
    /// Values in the step's input (a workflow turn: the run's), each read by a JSON pointer
    /// (`/region`, `/order/priority`) and equal to the value given; at most
    /// [`MAX_INPUT_CONDITIONS`], so matching costs a few lookups whatever the input.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub input: BTreeMap<String, Value>,
}

/// The most input conditions one rule holds.
pub const MAX_INPUT_CONDITIONS: usize = 8;
/// The longest JSON pointer an input condition reads, in characters.
pub const MAX_POINTER_CHARS: usize = 256;

/// What is being routed: a step of a run, or a turn of its workflow (`step` is `None`).
#[derive(Clone, Copy, Debug)]
pub struct RouteTarget<'a> {
    /// The run's workflow.
    pub workflow: &'a str,
    /// The step's name, `None` for a workflow turn.
    pub step: Option<&'a str>,
    /// The run's tags.
    pub tags: &'a [String],
    /// The run's search attributes.
    pub attributes: &'a Map<String, Value>,
    /// The step's input (a workflow turn: the run's).
    pub input: Option<&'a Value>,
}

/// Why a list of rules was refused; nothing was saved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RoutingError {
    /// No rules at all.
    #[error(
        "the list has no rules: end it with a catch-all, `{{\"match\": {{}}, \"pool\": \"default\"}}`"
    )]
    Empty,
    /// The last rule matches only some sends.
    #[error(
        "the last rule must match everything (`\"match\": {{}}`), so every step has a pool; add `{{\"match\": {{}}, \"pool\": \"default\"}}` at the end"
    )]
    NoCatchAll,
    /// A catch-all before the end hides the rules after it.
    #[error("rule {after} can never match: rule {catch_all} before it matches everything")]
    Unreachable {
        /// The catch-all's position, from 1.
        catch_all: usize,
        /// The first rule after it, from 1.
        after: usize,
    },
    /// A rule names a pool the tenant does not have (nor is granted).
    #[error(
        "rule {rule} names pool `{pool}`, which is not one of the tenant's: create it first (PUT /api/v1/pools/{pool}), or use `default`"
    )]
    UnknownPool {
        /// The rule's position, from 1.
        rule: usize,
        /// The pool it names.
        pool: String,
    },
    /// A rule lists its own pool as a fallback, or one twice.
    #[error("rule {0} lists a fallback twice, or its own pool as one")]
    Fallback(usize),
    /// An input condition that cannot be one.
    #[error(
        "rule {0}'s input conditions are invalid: give at most {MAX_INPUT_CONDITIONS} JSON pointers such as `/region` (starting with `/`, at most {MAX_POINTER_CHARS} characters), each with the value it must equal"
    )]
    Input(usize),
    /// More rules than the plan allows.
    #[error("{count} rules given; the tenant's plan allows {limit} (max_rules)")]
    TooMany {
        /// How many were given.
        count: usize,
        /// The plan's limit.
        limit: usize,
    },
}

impl RuleMatch {
    /// Whether it matches everything.
    pub fn is_catch_all(&self) -> bool {
        self == &RuleMatch::default()
    }

    /// Whether `target` fits every field given.
    pub fn fits(&self, target: &RouteTarget<'_>) -> bool {
        self.workflow
            .as_deref()
            .is_none_or(|w| w == target.workflow)
            && self.step.as_deref().is_none_or(|s| target.step == Some(s))
            && self
                .tag
                .as_deref()
                .is_none_or(|t| target.tags.iter().any(|tag| tag == t))
            && self
                .attributes
                .iter()
                .all(|(key, value)| target.attributes.get(key) == Some(value))
            && self.input.iter().all(|(pointer, value)| {
                target.input.and_then(|input| input.pointer(pointer)) == Some(value)
            })
    }
}

impl Rule {
    /// The pool it sends to; `None` for the tenant's own partition.
    pub fn pool(&self) -> Option<PoolName> {
        if self.pool == DEFAULT_POOL {
            None
        } else {
            PoolName::parse(&self.pool).ok()
        }
    }
}

impl RoutingRules {
    /// The first rule that matches `target`, with its position from 1.
    pub fn first_match(&self, target: &RouteTarget<'_>) -> Option<(usize, &Rule)> {
        self.rules
            .iter()
            .enumerate()
            .find(|(_, rule)| rule.matches.fits(target))
            .map(|(i, rule)| (i + 1, rule))
    }

    /// Checks the list before it is saved: at most `limit` rules, a catch-all last and none
    /// before it, and every pool (and fallback) one of `pools` or `default`.
    pub fn check(&self, pools: &BTreeSet<PoolName>, limit: usize) -> Result<(), RoutingError> {
        if self.rules.is_empty() {
            return Err(RoutingError::Empty);
        }
        if self.rules.len() > limit {
            return Err(RoutingError::TooMany {
                count: self.rules.len(),
                limit,
            });
        }
        if let Some(i) = self.rules.iter().position(|r| r.matches.is_catch_all())
            && i + 1 < self.rules.len()
        {
            return Err(RoutingError::Unreachable {
                catch_all: i + 1,
                after: i + 2,
            });
        }
        if !self.rules.last().is_some_and(|r| r.matches.is_catch_all()) {
            return Err(RoutingError::NoCatchAll);
        }
        for (i, rule) in self.rules.iter().enumerate() {
            let input = &rule.matches.input;
            if input.len() > MAX_INPUT_CONDITIONS
                || input
                    .keys()
                    .any(|p| !p.starts_with('/') || p.chars().count() > MAX_POINTER_CHARS)
            {
                return Err(RoutingError::Input(i + 1));
            }
            let known = |name: &str| {
                name == DEFAULT_POOL || PoolName::parse(name).is_ok_and(|p| pools.contains(&p))
            };
            if !known(&rule.pool) {
                return Err(RoutingError::UnknownPool {
                    rule: i + 1,
                    pool: rule.pool.chars().take(64).collect(),
                });
            }
            let mut seen = BTreeSet::new();
            for fallback in &rule.fallback {
                if !pools.contains(fallback) {
                    return Err(RoutingError::UnknownPool {
                        rule: i + 1,
                        pool: fallback.to_string(),
                    });
                }
                if fallback.as_str() == rule.pool || !seen.insert(fallback) {
                    return Err(RoutingError::Fallback(i + 1));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pools(names: &[&str]) -> BTreeSet<PoolName> {
        names.iter().map(|n| PoolName::parse(n).unwrap()).collect()
    }

    fn rules(raw: Value) -> RoutingRules {
        serde_json::from_value(json!({ "rules": raw })).unwrap()
    }

    #[test]
    fn the_first_rule_that_fits_wins_and_a_step_rule_skips_turns() {
        let list = rules(json!([
            {"match": {"workflow": "render", "step": "gpu.blur"}, "pool": "gpu", "fallback": ["gpu-b"]},
            {"match": {"attributes": {"region": "eu"}}, "pool": "eu"},
            {"match": {"tag": "urgent"}, "pool": "fast", "priority": 10},
            {"match": {}, "pool": "default"},
        ]));
        list.check(&pools(&["gpu", "gpu-b", "eu", "fast"]), 10)
            .unwrap();
        let attrs = json!({"region": "eu"}).as_object().unwrap().clone();
        let none = Map::new();
        let tags = vec!["urgent".to_owned()];
        let at = |workflow, step, tags: &'static [String], attributes| RouteTarget {
            workflow,
            step,
            tags,
            attributes,
            input: None,
        };
        let first = |t: RouteTarget<'_>| list.first_match(&t).map(|(i, _)| i);
        assert_eq!(first(at("render", Some("gpu.blur"), &[], &none)), Some(1));
        assert_eq!(first(at("render", None, &[], &none)), Some(4), "a turn");
        assert_eq!(first(at("render", Some("gpu.blur"), &[], &attrs)), Some(1));
        assert_eq!(first(at("billing", Some("charge"), &[], &attrs)), Some(2));
        assert_eq!(
            list.first_match(&RouteTarget {
                workflow: "billing",
                step: Some("charge"),
                tags: &tags,
                attributes: &none,
                input: None,
            })
            .map(|(i, r)| (i, r.priority)),
            Some((3, Some(10)))
        );
        assert_eq!(first(at("billing", Some("charge"), &[], &none)), Some(4));
        assert_eq!(list.rules[3].pool(), None);
        assert_eq!(list.rules[0].pool(), Some(PoolName::parse("gpu").unwrap()));
    }

    #[test]
    fn a_list_without_a_catch_all_last_or_with_unknown_pools_is_refused() {
        let known = pools(&["gpu"]);
        assert_eq!(rules(json!([])).check(&known, 10), Err(RoutingError::Empty));
        assert_eq!(
            rules(json!([{"match": {"step": "x"}, "pool": "gpu"}])).check(&known, 10),
            Err(RoutingError::NoCatchAll)
        );
        assert_eq!(
            rules(
                json!([{"match": {}, "pool": "gpu"}, {"match": {"step": "x"}, "pool": "default"}])
            )
            .check(&known, 10),
            Err(RoutingError::Unreachable {
                catch_all: 1,
                after: 2
            })
        );
        let unknown = rules(json!([{"match": {}, "pool": "tpu"}])).check(&known, 10);
        assert_eq!(
            unknown,
            Err(RoutingError::UnknownPool {
                rule: 1,
                pool: "tpu".into()
            })
        );
        assert!(
            unknown
                .unwrap_err()
                .to_string()
                .contains("PUT /api/v1/pools/tpu")
        );
        assert_eq!(
            rules(json!([{"match": {}, "pool": "gpu", "fallback": ["gpu"]}])).check(&known, 10),
            Err(RoutingError::Fallback(1))
        );
        assert_eq!(
            rules(
                json!([{"match": {"step": "a"}, "pool": "gpu"}, {"match": {}, "pool": "default"}])
            )
            .check(&known, 1),
            Err(RoutingError::TooMany { count: 2, limit: 1 })
        );
        assert!(
            serde_json::from_value::<RoutingRules>(
                json!({"rules": [{"match": {"nope": 1}, "pool": "default"}]})
            )
            .is_err(),
            "an unknown match field is refused, not ignored"
        );
    }

    #[test]
    fn an_input_condition_reads_the_steps_input_by_pointer_and_is_bounded() {
        let list = rules(json!([
            {"match": {"input": {"/order/region": "eu", "/express": true}}, "pool": "eu"},
            {"match": {}, "pool": "default"},
        ]));
        list.check(&pools(&["eu"]), 10).unwrap();
        let none = Map::new();
        let first = |input: Value| {
            list.first_match(&RouteTarget {
                workflow: "ship",
                step: Some("label"),
                tags: &[],
                attributes: &none,
                input: Some(&input),
            })
            .map(|(i, _)| i)
        };
        assert_eq!(
            first(json!({"order": {"region": "eu"}, "express": true})),
            Some(1)
        );
        assert_eq!(first(json!({"order": {"region": "eu"}})), Some(2));
        assert_eq!(first(json!("not an object")), Some(2));
        let too_many: serde_json::Map<String, Value> =
            (0..9).map(|i| (format!("/k{i}"), json!(1))).collect();
        let bad = rules(
            json!([{"match": {"input": too_many}, "pool": "eu"}, {"match": {}, "pool": "default"}]),
        );
        assert_eq!(bad.check(&pools(&["eu"]), 10), Err(RoutingError::Input(1)));
        let bad = rules(
            json!([{"match": {"input": {"region": "eu"}}, "pool": "eu"}, {"match": {}, "pool": "default"}]),
        );
        assert_eq!(bad.check(&pools(&["eu"]), 10), Err(RoutingError::Input(1)));
    }
}
