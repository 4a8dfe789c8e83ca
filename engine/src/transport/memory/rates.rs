//! Rate allowances in this process's memory: the embedded default is one process, so one map
//! is every control plane's counter.

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;

use super::MemoryTransport;
use crate::fair::rate;
use crate::model::{Millis, Namespace};
use crate::transport::{RateLimits, TransportResult};

/// The fewest allowances the map holds before those that no longer hold anything back go.
const PRUNE_AT: usize = 10_000;

/// Each allowance's theoretical arrival time (µs), by tenant and name.
type Tats = HashMap<(Namespace, String), i64>;

/// The allowances, and the size at which the map is next pruned.
#[derive(Default)]
pub(super) struct Allowances(Mutex<(Tats, usize)>);

#[async_trait]
impl RateLimits for MemoryTransport {
    async fn take(
        &self,
        tenant: &Namespace,
        name: &str,
        per_minute: u32,
        now: Millis,
    ) -> TransportResult<Option<Millis>> {
        let mut guard = self.inner.rates.0.lock().unwrap_or_else(|p| p.into_inner());
        let (allowances, prune_at) = &mut *guard;
        let key = (tenant.clone(), name.to_owned());
        match rate::take(allowances.get(&key).copied(), now, per_minute) {
            Ok(tat) => {
                allowances.insert(key, tat);
                if allowances.len() > (*prune_at).max(PRUNE_AT) {
                    // Keys come from inputs (a step's rate per customer): one whose time has
                    // passed allows a full burst, as a missing one does, so it can go. The next
                    // prune waits for the map to double, so takes stay O(1) on average.
                    let now_us = now.saturating_mul(1000);
                    allowances.retain(|_, tat| *tat > now_us);
                    *prune_at = allowances.len() * 2;
                }
                Ok(None)
            }
            Err(wait) => Ok(Some(wait)),
        }
    }
}
