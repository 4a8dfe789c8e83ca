//! The plans this engine enforces, read from the store and kept for a moment: a start, a claim
//! round and a child each ask for their tenant's plan, and a read per ask would cost a query
//! each. A plan changed on another control plane is seen here within [`FRESH_FOR`]; one changed
//! through this engine at once.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use std::time::Instant;

use crate::fair::Weight;
use crate::model::{Namespace, Plan};
use crate::store::{Store, StoreResult};

/// How long a read of the plans is used before the next ask reads them again.
pub(crate) const FRESH_FOR: Duration = Duration::from_secs(1);

/// Every tenant's plan as of one read.
#[derive(Debug, Default)]
pub(crate) struct PlanSet {
    default: Plan,
    tenants: HashMap<Namespace, Plan>,
}

impl PlanSet {
    /// `tenant`'s plan over the default.
    pub fn of(&self, tenant: &Namespace) -> Plan {
        match self.tenants.get(tenant) {
            Some(own) => own.over(&self.default),
            None => self.default.clone(),
        }
    }

    /// `tenant`'s fair-share weight.
    pub fn weight(&self, tenant: &Namespace) -> Weight {
        Weight::new(self.of(tenant).weight.unwrap_or(1))
    }

    /// `tenant`'s concurrency ceiling, if it has one.
    pub fn max_concurrent_runs(&self, tenant: &Namespace) -> Option<u32> {
        self.of(tenant).max_concurrent_runs
    }
}

/// The plans as the store lists them: the default (`None`) and each tenant's own.
impl FromIterator<(Option<Namespace>, Plan)> for PlanSet {
    fn from_iter<I: IntoIterator<Item = (Option<Namespace>, Plan)>>(rows: I) -> Self {
        let mut set = PlanSet::default();
        for (tenant, plan) in rows {
            match tenant {
                None => set.default = plan,
                Some(tenant) => {
                    set.tenants.insert(tenant, plan);
                }
            }
        }
        set
    }
}

/// The plans, read at most once per [`FRESH_FOR`].
#[derive(Default)]
pub(crate) struct PlanBook {
    current: RwLock<Option<(Instant, Arc<PlanSet>)>>,
    /// One read at a time; the others wait for it rather than read too.
    reading: tokio::sync::Mutex<()>,
    /// Bumped by [`PlanBook::forget`]: a read that began before a change must not be kept as
    /// fresh after it.
    generation: AtomicU64,
}

impl PlanBook {
    /// The plans, read again if the last read is older than [`FRESH_FOR`]. If the store cannot
    /// be read, the last plans stay in force (none, before the first read).
    pub async fn current(&self, store: &dyn Store) -> Arc<PlanSet> {
        if let Some(plans) = self.fresh() {
            return plans;
        }
        let _reading = self.reading.lock().await;
        if let Some(plans) = self.fresh() {
            return plans;
        }
        loop {
            let generation = self.generation.load(Ordering::SeqCst);
            let read = store.plans().await;
            // A plan changed while we read: what we read may predate it, so read again.
            if let Some(set) = self.keep(read, generation) {
                return set;
            }
        }
    }

    /// Keeps what a read of the plans begun at `generation` gave (or the last plans, if it
    /// failed); `None` if a change came since, checked under the same lock `forget` takes.
    fn keep(
        &self,
        read: StoreResult<Vec<(Option<Namespace>, Plan)>>,
        generation: u64,
    ) -> Option<Arc<PlanSet>> {
        let mut current = self.write();
        if self.generation.load(Ordering::SeqCst) != generation {
            return None;
        }
        let set = match read {
            Ok(rows) => Arc::new(rows.into_iter().collect()),
            Err(e) => {
                tracing::warn!(error = %e, "reading the tenants' plans failed; the last ones stay in force");
                // Kept as if fresh: every ask would otherwise wait for a failing store.
                current
                    .as_ref()
                    .map(|(_, set)| set.clone())
                    .unwrap_or_default()
            }
        };
        *current = Some((Instant::now(), set.clone()));
        Some(set)
    }

    /// `tenant`'s weight as of the last read, without reading: for a stage that must not wait
    /// on the store to order its work (the default weight before the first read).
    pub fn last_weight(&self, tenant: &Namespace) -> Weight {
        match &*self.read() {
            Some((_, set)) => set.weight(tenant),
            None => Weight::default(),
        }
    }

    /// Forgets the last read, after a plan was changed through this engine.
    pub fn forget(&self) {
        let mut current = self.write();
        self.generation.fetch_add(1, Ordering::SeqCst);
        *current = None;
    }

    fn fresh(&self) -> Option<Arc<PlanSet>> {
        match &*self.read() {
            Some((at, set)) if at.elapsed() < FRESH_FOR => Some(set.clone()),
            _ => None,
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Option<(Instant, Arc<PlanSet>)>> {
        self.current.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Option<(Instant, Arc<PlanSet>)>> {
        self.current.write().unwrap_or_else(|p| p.into_inner())
    }
}
