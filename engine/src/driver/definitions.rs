//! Each tenant's definitions (its pools, its routing rules, and its connections, sealed, with
//! its wrapped data key), read from the store and kept per tenant: every turn that sends a step
//! routes it by them, every step that asks for a connection reads it there, and a read each
//! time would cost queries each. A kept copy is checked against the tenant's definitions version once it is
//! [`FRESH_FOR`] old, and a pool it lacks is looked for in the store before a step naming it is
//! refused: a pool created on another control plane a moment ago is never taken for missing.
//! An edit through this engine drops its tenant's copy at once.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::model::{ConnectionName, Namespace, PoolName, RoutingRules};
use crate::runtime::{Command, Decision};
use crate::store::{Store, StoreResult, StoredConnection, TenantKey};

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
    /// The tenant's connections, secrets sealed.
    pub connections: HashMap<ConnectionName, StoredConnection>,
    /// The tenant's data key, wrapped; none until its first connection.
    pub key: Option<TenantKey>,
}

struct Kept {
    definitions: Arc<TenantDefinitions>,
    checked_at: Instant,
}

/// The definitions of the tenants whose turns sent steps lately, and the acknowledgements an
/// edit through this engine waits for.
#[derive(Default)]
pub(crate) struct DefinitionBook {
    tenants: Mutex<HashMap<Namespace, Kept>>,
    /// Per announced edit being waited for: the control planes that dropped their copy.
    acks: Mutex<HashMap<(Namespace, u64), HashSet<String>>>,
    acked: Notify,
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

    /// `tenant`'s definitions holding connection `name` if it has it: the kept copy, read
    /// again when it lacks the connection (created a moment ago on another control plane).
    pub async fn with_connection(
        &self,
        store: &dyn Store,
        tenant: &Namespace,
        name: &ConnectionName,
    ) -> StoreResult<Arc<TenantDefinitions>> {
        let kept = self.kept(store, tenant).await?;
        if kept.connections.contains_key(name) {
            return Ok(kept);
        }
        self.read(store, tenant).await
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
        let mut pools = store.pools(tenant).await?;
        pools.extend(
            store
                .granted_pools(tenant)
                .await?
                .iter()
                .map(|p| p.as_granted(tenant)),
        );
        let rules = store.routing_rules(tenant).await?;
        let connections = store.connections(tenant).await?;
        let key = match connections.is_empty() {
            true => None,
            false => store.tenant_key(tenant).await?,
        };
        let definitions = Arc::new(TenantDefinitions {
            version,
            pools: pools.into_iter().map(|p| p.name).collect(),
            rules,
            connections: connections
                .into_iter()
                .map(|c| (c.name.clone(), c))
                .collect(),
            key,
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

    /// Drops `tenant`'s kept copy if it is older than `version` (another control plane
    /// announced the edit).
    pub fn forget_before(&self, tenant: &Namespace, version: u64) {
        let mut tenants = self.tenants();
        if tenants
            .get(tenant)
            .is_some_and(|k| k.definitions.version < version)
        {
            tenants.remove(tenant);
        }
    }

    fn acks(&self) -> MutexGuard<'_, HashMap<(Namespace, u64), HashSet<String>>> {
        self.acks.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Notes that control plane `by` dropped its copy of `tenant`'s definitions before
    /// `version`, if an edit here waits for it (anything else is dropped: no wait, no memory).
    pub fn note_ack(&self, tenant: &Namespace, version: u64, by: &str) {
        if let Some(seen) = self.acks().get_mut(&(tenant.clone(), version)) {
            seen.insert(by.to_owned());
            self.acked.notify_waiters();
        }
    }

    /// Waits, `within` at most, until `peers` control planes other than `me` acknowledged
    /// `tenant`'s `version`, counting from `expect`'s call; how many did.
    pub async fn wait_for_acks(
        &self,
        tenant: &Namespace,
        version: u64,
        me: &str,
        peers: u32,
        within: Duration,
    ) -> u32 {
        let key = (tenant.clone(), version);
        let deadline = tokio::time::Instant::now() + within;
        let acked = loop {
            let notified = self.acked.notified();
            let acked = self
                .acks()
                .get(&key)
                .map_or(0, |seen| seen.iter().filter(|by| *by != me).count());
            let acked = u32::try_from(acked).unwrap_or(u32::MAX);
            if acked >= peers {
                break acked;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                break acked;
            }
        };
        self.acks().remove(&key);
        acked
    }

    /// Starts collecting acknowledgements of `tenant`'s `version`, before it is announced.
    pub fn expect_acks(&self, tenant: &Namespace, version: u64) {
        self.acks().entry((tenant.clone(), version)).or_default();
    }
}
