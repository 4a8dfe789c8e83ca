//! Where a step is sent and what a worker serves: a tenant's own partition, or one of its pools.
//!
//! A tenant's partition is its name (`acme`); a pool of the tenant's is `<tenant>.<pool>`
//! (`acme.gpu`), the string an SDK worker passes as its partition to serve that pool, and the
//! suffix of the pool's routing tokens (`charge@acme.gpu`). Tenant names hold no `.`, so the
//! tenant of any partition is what comes before the first one: fairness, limits and scoping
//! always know whose work a task is, whichever pool it went to. A shared pool an operator grants
//! to several tenants is spelled the same way for each of them (`acme.gpu`, `globex.gpu`): one
//! queue per tenant inside the pool, so its workers can take from them fairly.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::{Namespace, NamespaceError};

/// The name of a worker pool: lowercase `[a-z0-9][a-z0-9_-]{0,62}`, as a tenant's; `default`
/// is not one (it names the tenant's own partition where a pool can be named).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct PoolName(String);

/// Why a pool name or a partition was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PartitionError {
    /// The pool name breaks the naming rules.
    #[error(
        "pool name `{0}` is invalid: use 1 to 63 lowercase letters, digits, `_` and `-`, starting with a letter or digit"
    )]
    Pool(String),
    /// `default` names the tenant's own partition, not a pool.
    #[error("`default` names the tenant's own partition and cannot name a pool; pick another name")]
    Reserved,
    /// The tenant part of a partition is not a tenant name.
    #[error("partition `{partition}`: {error}")]
    Tenant {
        /// The partition as given.
        partition: String,
        /// What is wrong with its tenant part.
        error: NamespaceError,
    },
}

impl PoolName {
    /// Checks a pool name taken from a URL, a form, a flag or a stored row.
    pub fn parse(raw: &str) -> Result<Self, PartitionError> {
        if raw == Namespace::DEFAULT_NAME {
            return Err(PartitionError::Reserved);
        }
        let ok = Namespace::parse(raw).is_ok() && !raw.is_empty();
        if ok {
            Ok(PoolName(raw.to_owned()))
        } else {
            Err(PartitionError::Pool(raw.chars().take(64).collect()))
        }
    }

    /// The name as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for PoolName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for PoolName {
    type Error = PartitionError;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        PoolName::parse(&value)
    }
}

impl From<PoolName> for String {
    fn from(value: PoolName) -> Self {
        value.0
    }
}

/// A tenant's partition, or one of its pools (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub struct Partition {
    tenant: Namespace,
    pool: Option<PoolName>,
}

impl Partition {
    /// The tenant's own partition: where its work goes when nothing routes it elsewhere.
    pub fn of_tenant(tenant: Namespace) -> Self {
        Partition { tenant, pool: None }
    }

    /// Pool `pool` of `tenant` (its own, or a shared pool granted to it).
    pub fn of_pool(tenant: Namespace, pool: PoolName) -> Self {
        Partition {
            tenant,
            pool: Some(pool),
        }
    }

    /// Checks a partition given by a person or a worker: `acme`, `acme.gpu`, or `""`/`default`
    /// for the default partition.
    pub fn parse(raw: &str) -> Result<Self, PartitionError> {
        let (tenant, pool) = match raw.split_once('.') {
            Some((tenant, pool)) => (tenant, Some(PoolName::parse(pool)?)),
            None => (raw, None),
        };
        let tenant = Namespace::parse(tenant).map_err(|error| PartitionError::Tenant {
            partition: raw.chars().take(64).collect(),
            error,
        })?;
        Ok(Partition { tenant, pool })
    }

    /// Reads a partition off a routing token or a stored row, which the engine wrote: the
    /// tenant is what comes before the first `.`, the pool what follows it.
    pub fn from_stored(raw: &str) -> Self {
        match raw.split_once('.') {
            Some((tenant, pool)) => Partition {
                tenant: Namespace::from_stored(Some(tenant)),
                pool: Some(PoolName(pool.to_owned())),
            },
            None => Partition::of_tenant(Namespace::from_stored(Some(raw))),
        }
    }

    /// Whose work goes here.
    pub fn tenant(&self) -> &Namespace {
        &self.tenant
    }

    /// The pool, `None` for the tenant's own partition.
    pub fn pool(&self) -> Option<&PoolName> {
        self.pool.as_ref()
    }

    /// Whether this is the default partition, whose tokens carry no suffix.
    pub fn is_default(&self) -> bool {
        self.pool.is_none() && self.tenant.is_default()
    }
}

impl From<Namespace> for Partition {
    fn from(tenant: Namespace) -> Self {
        Partition::of_tenant(tenant)
    }
}

impl fmt::Display for Partition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.pool {
            Some(pool) => write!(f, "{}.{pool}", self.tenant),
            None => write!(f, "{}", self.tenant),
        }
    }
}

impl From<String> for Partition {
    fn from(value: String) -> Self {
        Partition::from_stored(&value)
    }
}

impl From<Partition> for String {
    fn from(value: Partition) -> Self {
        value.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns(raw: &str) -> Namespace {
        Namespace::parse(raw).expect("namespace")
    }

    #[test]
    fn a_pool_partition_is_its_tenant_a_dot_and_its_name() {
        let gpu = Partition::parse("acme.gpu").expect("parses");
        assert_eq!(gpu.tenant(), &ns("acme"));
        assert_eq!(gpu.pool().map(PoolName::as_str), Some("gpu"));
        assert_eq!(gpu.to_string(), "acme.gpu");
        assert!(!gpu.is_default());
        let own = Partition::parse("acme").expect("parses");
        assert_eq!(own, Partition::of_tenant(ns("acme")));
        assert_eq!(own.to_string(), "acme");
        assert!(Partition::parse("").expect("default").is_default());
        assert!(Partition::parse("default").expect("default").is_default());
        assert!(
            !Partition::parse("default.gpu")
                .expect("a pool")
                .is_default()
        );
        assert_eq!(Partition::from_stored("acme.gpu"), gpu);
        assert_eq!(Partition::from_stored(&gpu.to_string()), gpu);
    }

    #[test]
    fn bad_pool_and_tenant_parts_are_refused_with_the_rule() {
        for bad in [
            "acme.",
            "acme.GPU",
            "acme.g.p",
            "acme.-x",
            "Acme.gpu",
            "acme@x.gpu",
        ] {
            let err = Partition::parse(bad).expect_err(bad);
            assert!(err.to_string().contains("lowercase"), "{bad}: {err}");
        }
        assert!(PoolName::parse(&"x".repeat(64)).is_err());
        assert_eq!(PoolName::parse("default"), Err(PartitionError::Reserved));
        assert!(Partition::parse("acme.default").is_err());
        assert!(PoolName::parse("gpu-2_eu").is_ok());
    }

    #[test]
    fn a_partition_serializes_as_its_string() {
        let gpu = Partition::of_pool(ns("acme"), PoolName::parse("gpu").expect("pool"));
        assert_eq!(serde_json::to_value(&gpu).expect("json"), "acme.gpu");
        let back: Partition = serde_json::from_value("acme.gpu".into()).expect("reads");
        assert_eq!(back, gpu);
    }
}
