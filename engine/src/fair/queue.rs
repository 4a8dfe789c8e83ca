//! The tiered fair queue: stride scheduling between tenants, round robin between one tenant's
//! keys, earliest-due first within a key.
//!
//! Each tenant has a *pass* (its virtual time) that advances by `STRIDE / weight` each time it is
//! served, and the tenant with the lowest pass is served next (ties: the earliest-due head). A
//! tenant that was idle re-enters at the current virtual time rather than its old pass, so idle
//! time buys no burst later, and an idle tenant's share goes to the others at once: the queue is
//! work-conserving. Weights split the service in their ratio under saturation.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::hash::Hash;

use crate::model::Millis;

/// A tenant's share relative to the others (1 is the default; 3 gets three times the service
/// of a tenant with 1 while both have work).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Weight(u32);

impl Weight {
    /// A weight of `n`, at least 1.
    pub fn new(n: u32) -> Self {
        Weight(n.max(1))
    }

    /// The weight as a number (at least 1).
    pub fn get(self) -> u32 {
        self.0
    }
}

impl Default for Weight {
    fn default() -> Self {
        Weight(1)
    }
}

/// The virtual time one service costs a tenant of weight 1.
const STRIDE: u128 = 1 << 20;

/// Work waiting for a shared resource, released fairly between tenants `T` and, within a
/// tenant, between its keys `K`.
#[derive(Debug)]
pub struct FairQueue<T, K, V> {
    tenants: HashMap<T, Lane<K, V>>,
    weights: HashMap<T, Weight>,
    /// The virtual time when no tenant has work: the pass of the last one served.
    now: u128,
    /// Items waiting, in all.
    len: usize,
    /// Arrival counter: ties between items due at once go in arrival order.
    arrivals: u64,
}

#[derive(Debug)]
struct Lane<K, V> {
    pass: u128,
    /// When it last came back from idle (an arrival number): the last tie-break, so ties go
    /// the same way every time.
    since: u64,
    /// Each key's items by (due, arrival).
    keys: HashMap<K, BTreeMap<(Millis, u64), V>>,
    /// The keys with work, in the order they are served.
    turn: VecDeque<K>,
}

impl<T, K, V> Default for FairQueue<T, K, V> {
    fn default() -> Self {
        FairQueue {
            tenants: HashMap::new(),
            weights: HashMap::new(),
            now: 0,
            len: 0,
            arrivals: 0,
        }
    }
}

impl<T: Clone + Eq + Hash, K: Clone + Eq + Hash, V> FairQueue<T, K, V> {
    /// An empty queue; every tenant has weight 1 until [`FairQueue::set_weight`].
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `tenant`'s weight, from its next service on.
    pub fn set_weight(&mut self, tenant: T, weight: Weight) {
        self.weights.insert(tenant, weight);
    }

    /// Items waiting.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether `tenant` has items waiting.
    pub fn holds(&self, tenant: &T) -> bool {
        self.tenants
            .get(tenant)
            .is_some_and(|lane| !lane.turn.is_empty())
    }

    /// The tenants with items waiting.
    pub fn tenants(&self) -> impl Iterator<Item = &T> {
        self.tenants
            .iter()
            .filter(|(_, lane)| !lane.turn.is_empty())
            .map(|(tenant, _)| tenant)
    }

    /// Whether nothing waits.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Queues `item` of `tenant` under `key`, due at `due` (earlier due goes first within its
    /// key; equal ones in arrival order).
    pub fn push(&mut self, tenant: T, key: K, due: Millis, item: V) {
        // The virtual time: the lowest pass among tenants with work.
        let now = self
            .tenants
            .values()
            .filter(|lane| !lane.turn.is_empty())
            .map(|lane| lane.pass)
            .min()
            .unwrap_or(self.now);
        let arrival = self.arrivals;
        let lane = self.tenants.entry(tenant).or_insert_with(|| Lane {
            pass: now,
            since: arrival,
            keys: HashMap::new(),
            turn: VecDeque::new(),
        });
        if lane.turn.is_empty() {
            // Back from idle: no credit for the time it had nothing waiting.
            lane.pass = lane.pass.max(now);
            lane.since = arrival;
        }
        lane.insert(key, due, arrival, item);
        self.arrivals += 1;
        self.len += 1;
    }

    /// Replaces every waiting item with `items`, keeping each tenant's place: a tenant that had
    /// items waiting keeps its pass, any other enters at the virtual time, as [`FairQueue::push`]
    /// would let it. For a stage that reads again what waits (the claim loop asks the store)
    /// rather than being handed each item once; passes must outlive the reads, or the
    /// earliest-due tenant would win every read.
    pub fn refill(&mut self, items: impl IntoIterator<Item = (T, K, Millis, V)>) {
        let waiting: HashSet<T> = self
            .tenants
            .iter()
            .filter(|(_, lane)| !lane.turn.is_empty())
            .map(|(tenant, _)| tenant.clone())
            .collect();
        for lane in self.tenants.values_mut() {
            lane.keys.clear();
            lane.turn.clear();
        }
        self.len = 0;
        let mut back = HashSet::new();
        for (tenant, key, due, item) in items {
            let arrival = self.arrivals;
            let lane = self.tenants.entry(tenant.clone()).or_insert_with(|| Lane {
                pass: 0,
                since: arrival,
                keys: HashMap::new(),
                turn: VecDeque::new(),
            });
            if lane.turn.is_empty() && !waiting.contains(&tenant) {
                lane.since = arrival;
                back.insert(tenant);
            }
            lane.insert(key, due, arrival, item);
            self.arrivals += 1;
            self.len += 1;
        }
        let now = self
            .tenants
            .iter()
            .filter(|(tenant, lane)| !lane.turn.is_empty() && waiting.contains(*tenant))
            .map(|(_, lane)| lane.pass)
            .min()
            .unwrap_or(self.now);
        for tenant in back {
            if let Some(lane) = self.tenants.get_mut(&tenant) {
                lane.pass = lane.pass.max(now);
            }
        }
        let weights = &self.weights;
        self.tenants
            .retain(|tenant, lane| !lane.turn.is_empty() || weights.contains_key(tenant));
    }

    /// Takes the next item: the tenant furthest behind its share, that tenant's next key in
    /// turn, that key's earliest item. `None` when nothing waits.
    pub fn pop(&mut self) -> Option<(T, K, V)> {
        self.pop_if(|_| true)
    }

    /// [`FairQueue::pop`] among the tenants `allowed` admits only: for a resource some tenants
    /// may not use now (one kept for the tenants that hold none of the others).
    pub fn pop_if(&mut self, allowed: impl Fn(&T) -> bool) -> Option<(T, K, V)> {
        let tenant = self
            .tenants
            .iter()
            .filter(|(tenant, lane)| !lane.turn.is_empty() && allowed(tenant))
            .min_by_key(|(_, lane)| (lane.pass, lane.head_due(), lane.since))
            .map(|(tenant, _)| tenant.clone())?;
        let stride = STRIDE / u128::from(self.weights.get(&tenant).copied().unwrap_or_default().0);
        let lane = self.tenants.get_mut(&tenant)?;
        let key = lane.turn.pop_front()?;
        let items = lane.keys.get_mut(&key)?;
        let (_, item) = items.pop_first()?;
        if items.is_empty() {
            lane.keys.remove(&key);
        } else {
            lane.turn.push_back(key.clone());
        }
        lane.pass += stride;
        self.now = lane.pass;
        self.len -= 1;
        if lane.turn.is_empty() && !self.weights.contains_key(&tenant) {
            // Nothing to remember for an idle tenant without a weight: its pass restarts at
            // the virtual time when it comes back.
            self.tenants.remove(&tenant);
        }
        Some((tenant, key, item))
    }

    /// Counts `times` services of `tenant` given outside the queue (a turn slot it took
    /// directly), so the queue's order weighs all it got, not only what it popped. Only while
    /// another tenant has items waiting: service no one else wanted is work-conserving, not a
    /// debt to pay back once someone does.
    pub fn charge(&mut self, tenant: &T, times: u32) {
        let contended = self
            .tenants
            .iter()
            .any(|(t, lane)| t != tenant && !lane.turn.is_empty());
        if !contended {
            return;
        }
        let stride = STRIDE / u128::from(self.weights.get(tenant).copied().unwrap_or_default().0);
        if let Some(lane) = self.tenants.get_mut(tenant) {
            lane.pass = lane.pass.saturating_add(stride * u128::from(times));
        }
    }

    /// Takes back one service of `tenant` that did not happen: an item popped for a resource
    /// someone else took first (another control plane claimed the run). Its pass is as if the
    /// pop had not been, so stages that share work keep their splits to the weights rather
    /// than charging a tenant for the races it lost.
    pub fn refund(&mut self, tenant: &T) {
        let stride = STRIDE / u128::from(self.weights.get(tenant).copied().unwrap_or_default().0);
        if let Some(lane) = self.tenants.get_mut(tenant) {
            lane.pass = lane.pass.saturating_sub(stride);
        }
    }
}

impl<K: Clone + Eq + Hash, V> Lane<K, V> {
    /// Queues `item` under `key`; a key that had nothing waiting takes its turn last.
    fn insert(&mut self, key: K, due: Millis, arrival: u64, item: V) {
        let items = self.keys.entry(key.clone()).or_default();
        if items.is_empty() {
            self.turn.push_back(key);
        }
        items.insert((due, arrival), item);
    }

    /// When this tenant's next item is due (its next key's earliest).
    fn head_due(&self) -> Millis {
        self.turn
            .front()
            .and_then(|key| self.keys.get(key))
            .and_then(|items| items.keys().next())
            .map_or(Millis::MAX, |(due, _)| *due)
    }
}

#[cfg(test)]
mod tests;
