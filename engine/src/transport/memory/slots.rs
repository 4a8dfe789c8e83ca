//! Concurrency slots in this process's memory: the embedded default is one process, so one map
//! is every control plane's counter. Counters with no holder and no waiter are dropped.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Mutex;

use async_trait::async_trait;

use super::MemoryTransport;
use crate::model::{Millis, Namespace, RunId};
use crate::transport::{SlotClaim, Slots, TransportResult};

/// One counter: its holders' lease ends, and the runs waiting for room, earliest first (the
/// set says who is in the line, so joining it is O(1) however long it is).
#[derive(Default)]
struct Counter {
    holders: HashMap<String, Millis>,
    waiters: VecDeque<RunId>,
    waiting: HashSet<RunId>,
}

/// The counters, by tenant and name.
#[derive(Default)]
pub(super) struct Counters(Mutex<HashMap<(Namespace, String), Counter>>);

impl Counters {
    fn with<T>(&self, tenant: &Namespace, counter: &str, f: impl FnOnce(&mut Counter) -> T) -> T {
        let mut all = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let key = (tenant.clone(), counter.to_owned());
        let entry = all.entry(key.clone()).or_default();
        let out = f(entry);
        if entry.holders.is_empty() && entry.waiters.is_empty() {
            all.remove(&key);
        }
        out
    }
}

#[async_trait]
impl Slots for MemoryTransport {
    async fn acquire(
        &self,
        tenant: &Namespace,
        counter: &str,
        claim: SlotClaim<'_>,
        now: Millis,
    ) -> TransportResult<bool> {
        Ok(self.inner.slots.with(tenant, counter, |c| {
            c.holders.retain(|_, until| *until > now);
            let room =
                c.holders.contains_key(claim.holder) || c.holders.len() < claim.limit as usize;
            if room {
                c.holders.insert(claim.holder.to_owned(), claim.until);
                if c.waiting.remove(claim.waiter) {
                    c.waiters.retain(|w| w != claim.waiter);
                }
            } else if c.waiting.insert(claim.waiter.clone()) {
                c.waiters.push_back(claim.waiter.clone());
            }
            room
        }))
    }

    async fn renew(
        &self,
        tenant: &Namespace,
        counter: &str,
        holder: &str,
        until: Millis,
        _now: Millis,
    ) -> TransportResult<()> {
        self.inner.slots.with(tenant, counter, |c| {
            c.holders.insert(holder.to_owned(), until);
        });
        Ok(())
    }

    async fn release(
        &self,
        tenant: &Namespace,
        counter: &str,
        holder: &str,
    ) -> TransportResult<Option<RunId>> {
        Ok(self.inner.slots.with(tenant, counter, |c| {
            c.holders.remove(holder);
            let next = c.waiters.pop_front();
            if let Some(next) = &next {
                c.waiting.remove(next);
            }
            next
        }))
    }
}
