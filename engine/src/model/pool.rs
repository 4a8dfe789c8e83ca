//! A tenant's worker pool: a named partition of its own (`acme.gpu`) that a group of workers
//! serves (`durable worker --tenant acme --pool gpu`, or an SDK worker on partition
//! `acme.gpu`), with labels that say what the pool offers (`region=eu`, `gpu=a100`) for the
//! people and the routing rules that pick it.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::{Millis, Namespace, Partition, PoolName};

/// The most labels one pool carries.
pub const MAX_POOL_LABELS: usize = 32;
/// The longest label key, in characters.
pub const MAX_LABEL_KEY_CHARS: usize = 63;
/// The longest label value, in characters.
pub const MAX_LABEL_VALUE_CHARS: usize = 256;

/// A stored pool.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pool {
    /// Whose pool it is.
    pub tenant: Namespace,
    /// Its name within the tenant.
    pub name: PoolName,
    /// What it offers, for people and rules.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// When it was created.
    pub created_at: Millis,
    /// When it was last changed.
    pub updated_at: Millis,
    /// Whether it is an operator's shared pool granted to the tenant (its workers serve other
    /// tenants too), rather than one of the tenant's own.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub shared: bool,
}

/// A pool as its tenant's doors list it: where its workers connect, who is live there and with
/// what, and how many of its steps are out.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolStatus {
    /// The pool.
    #[serde(flatten)]
    pub pool: Pool,
    /// The partition its workers serve: `durable worker --tenant T --pool P`, or an SDK worker
    /// with this partition.
    pub partition: String,
    /// Its live workers, by what they serve.
    pub workers: Vec<PoolWorkers>,
    /// Its steps sent and not yet answered (waiting or running).
    pub waiting: u64,
}

/// The live workers on a pool serving one step or workflow, and what they announced.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolWorkers {
    /// The step or workflow they serve.
    pub name: String,
    /// How many are live.
    pub workers: u32,
    /// When one was last heard from.
    pub last_seen: Option<Millis>,
    /// The capabilities they announced, each once (a step's `requires` is matched against
    /// these); empty when none announced a descriptor.
    #[serde(default)]
    pub capabilities: Vec<String>,
    /// Their SDKs, as `name version`, each once.
    #[serde(default)]
    pub sdks: Vec<String>,
}

/// A pool an operator runs for several tenants: one group of workers (`durable worker --pool
/// gpu`, with no tenant) serves the steps of every tenant it is granted to. Each tenant's steps
/// wait in a queue of their own, on the partition `<tenant>.<pool>` as for the tenant's own
/// pools, so the workers take from the tenants fairly, by their plans' weights, and one
/// tenant's backlog does not hold another's steps back. A tenant cannot have a pool of its own
/// by the name of one it is granted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SharedPool {
    /// Its name, the same for every tenant it is granted to.
    pub name: PoolName,
    /// What it offers.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// The tenants it is granted to.
    #[serde(default)]
    pub grants: BTreeSet<Namespace>,
    /// When it was created.
    pub created_at: Millis,
    /// When it was last changed.
    pub updated_at: Millis,
}

impl SharedPool {
    /// The pool as `tenant` lists it among its own.
    pub fn as_granted(&self, tenant: &Namespace) -> Pool {
        Pool {
            tenant: tenant.clone(),
            name: self.name.clone(),
            labels: self.labels.clone(),
            created_at: self.created_at,
            updated_at: self.updated_at,
            shared: true,
        }
    }
}

impl Pool {
    /// The partition its workers serve, and its steps are sent on (`acme.gpu`).
    pub fn partition(&self) -> Partition {
        Partition::of_pool(self.tenant.clone(), self.name.clone())
    }
}

/// Why a pool's labels were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LabelError {
    /// Too many labels.
    #[error("{0} labels given; a pool carries at most {MAX_POOL_LABELS}")]
    TooMany(usize),
    /// A key breaks the naming rules.
    #[error(
        "label key `{0}` is invalid: use 1 to {MAX_LABEL_KEY_CHARS} letters, digits, `_`, `-`, `.` or `/`"
    )]
    Key(String),
    /// A value is too long or holds a control character.
    #[error(
        "the value of label `{0}` is longer than {MAX_LABEL_VALUE_CHARS} characters or holds a control character"
    )]
    Value(String),
}

/// Checks a pool's labels: at most [`MAX_POOL_LABELS`], each key a short name, each value a
/// short line of text.
pub fn check_labels(labels: &BTreeMap<String, String>) -> Result<(), LabelError> {
    if labels.len() > MAX_POOL_LABELS {
        return Err(LabelError::TooMany(labels.len()));
    }
    for (key, value) in labels {
        let key_ok = !key.is_empty()
            && key.chars().count() <= MAX_LABEL_KEY_CHARS
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/'));
        if !key_ok {
            return Err(LabelError::Key(key.chars().take(64).collect()));
        }
        if value.chars().count() > MAX_LABEL_VALUE_CHARS || value.chars().any(char::is_control) {
            return Err(LabelError::Value(key.clone()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn labels_are_short_names_with_short_values() {
        assert_eq!(
            check_labels(&labels(&[("region", "eu"), ("gpu/model", "a100")])),
            Ok(())
        );
        assert!(matches!(
            check_labels(&labels(&[("bad key", "x")])),
            Err(LabelError::Key(_))
        ));
        assert!(matches!(
            check_labels(&labels(&[("k", "line\nbreak")])),
            Err(LabelError::Value(_))
        ));
        let many: BTreeMap<String, String> =
            (0..33).map(|i| (format!("k{i}"), String::new())).collect();
        assert_eq!(check_labels(&many), Err(LabelError::TooMany(33)));
    }
}
