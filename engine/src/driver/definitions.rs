//! Each tenant's routing definitions (its pools and its routing rules), read from the store and
//! kept per tenant: every turn that sends a step routes it by them, and a read per turn would
//! cost queries each. A kept copy is checked against the tenant's definitions version once it is
//! [`FRESH_FOR`] old, and a pool it lacks is looked for in the store before a step naming it is
//! refused: a pool created on another control plane a moment ago is never taken for missing.
//! An edit through this engine drops its tenant's copy at once.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::model::{Namespace, PoolName, RoutingRules};
use crate::runtime::{Command, Decision};
use crate::store::{Store, StoreResult};

/// How long a kept copy is used before its version is checked again.
pub(crate) const FRESH_FOR: Duration = Duration::from_secs(5);

/// One tenant's definitions, as of one version.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct TenantDefinitions {
    /// The version they were read at.
    pub version: u64,
    /// The tenant's pools.
    pub pools: BTreeSet<PoolName>,
    /// The tenant's routing rules, if it set any.
    pub rules: Option<RoutingRules>,
}

struct Kept {
    definitions: Arc<TenantDefinitions>,
    checked_at: Instant,
}

/// The definitions of the tenants whose code named a pool lately.
#[derive(Default)]
pub(crate) struct DefinitionBook {
    tenants: Mutex<HashMap<Namespace, Kept>>,
}

impl DefinitionBook {
    fn tenants(&self) -> MutexGuard<'_, HashMap<Namespace, Kept>> {
        self.tenants.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `tenant`'s definitions when `decision` sends a step: kept ones, checked against the
    /// store's version once stale, and read again whenever a pool a call names is not among
    /// them. `None` when it sends none: nothing is read.
    pub async fn for_decision(
        &self,
        store: &dyn Store,
        tenant: &Namespace,
        decision: &Decision,
    ) -> StoreResult<Option<Arc<TenantDefinitions>>> {
        let sends = decision
            .commands
            .iter()
            .any(|c| matches!(c, Command::Call { .. } | Command::RetryStep { .. }));
        if !sends {
            return Ok(None);
        }
        let named: Vec<&PoolName> = decision
            .commands
            .iter()
            .filter_map(|c| match c {
                Command::Call { flow, .. } => flow.pool.as_ref(),
                _ => None,
            })
            .collect();
        let kept = self.kept(store, tenant).await?;
        if named.iter().all(|p| kept.pools.contains(*p)) {
            return Ok(Some(kept));
        }
        Ok(Some(self.read(store, tenant).await?))
    }

    /// `tenant`'s definitions: the kept copy, or a new read when there is none or its version
    /// moved on (a remote turn routes by them).
    pub async fn of(
        &self,
        store: &dyn Store,
        tenant: &Namespace,
    ) -> StoreResult<Arc<TenantDefinitions>> {
        self.kept(store, tenant).await
    }

    /// The kept copy, or a new read when there is none or its version moved on.
    async fn kept(
        &self,
        store: &dyn Store,
        tenant: &Namespace,
    ) -> StoreResult<Arc<TenantDefinitions>> {
        let kept = self
            .tenants()
            .get(tenant)
            .map(|k| (k.definitions.clone(), k.checked_at.elapsed() < FRESH_FOR));
        match kept {
            Some((definitions, true)) => Ok(definitions),
            Some((definitions, false))
                if store.definitions_version(tenant).await? == definitions.version =>
            {
                if let Some(k) = self.tenants().get_mut(tenant) {
                    k.checked_at = Instant::now();
                }
                Ok(definitions)
            }
            _ => self.read(store, tenant).await,
        }
    }

    /// Reads `tenant`'s definitions and keeps them. The version is read first: an edit between
    /// the two reads leaves a copy older than its data, which the next check reads again.
    async fn read(
        &self,
        store: &dyn Store,
        tenant: &Namespace,
    ) -> StoreResult<Arc<TenantDefinitions>> {
        let version = store.definitions_version(tenant).await?;
        let pools = store.pools(tenant).await?;
        let rules = store.routing_rules(tenant).await?;
        let definitions = Arc::new(TenantDefinitions {
            version,
            pools: pools.into_iter().map(|p| p.name).collect(),
            rules,
        });
        self.tenants().insert(
            tenant.clone(),
            Kept {
                definitions: definitions.clone(),
                checked_at: Instant::now(),
            },
        );
        Ok(definitions)
    }

    /// Drops `tenant`'s kept copy: it was edited through this engine.
    pub fn forget(&self, tenant: &Namespace) {
        self.tenants().remove(tenant);
    }
}
