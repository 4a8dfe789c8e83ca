//! Step run times counted by tenant and minute, in memory, until the activity loop adds them to
//! the store's minutes (`driver/loops/activity.rs`): recording a result costs a lock and an
//! addition, never a write, and a few seconds of counts go to the store in one statement.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::metrics::StepTimes;
use crate::model::{
    ACTIVITY_KEPT_MINUTES, LATENCY_SLOTS, Millis, Namespace, StepTally, latency_slot,
};

/// What this engine recorded and has not yet added to the store.
#[derive(Default)]
pub(crate) struct StepTallies {
    counts: Mutex<HashMap<(Namespace, i64), [u64; LATENCY_SLOTS]>>,
}

impl StepTallies {
    /// Counts a step of `tenant` whose result was recorded, if its run time is known.
    pub fn record(&self, tenant: &Namespace, step: &StepTimes) {
        let (Some(start), Some(end)) = (step.started_at, step.finished_at) else {
            return;
        };
        let slot = latency_slot(end.saturating_sub(start).max(0) as f64 / 1000.0);
        let minute = end.div_euclid(60_000);
        let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        counts
            .entry((tenant.clone(), minute))
            .or_insert([0; LATENCY_SLOTS])[slot] += 1;
    }

    /// Everything counted so far, leaving nothing.
    pub fn take(&self) -> Vec<StepTally> {
        let taken = std::mem::take(&mut *self.counts.lock().unwrap_or_else(|p| p.into_inner()));
        taken
            .into_iter()
            .map(|((tenant, minute), slots)| StepTally {
                tenant,
                minute,
                slots,
            })
            .collect()
    }

    /// Puts back tallies the store did not take, to be added next time; those older than the
    /// store keeps minutes (at `now`) are dropped, so an unreachable store cannot make this
    /// grow for ever.
    pub fn restore(&self, tallies: Vec<StepTally>, now: Millis) {
        let oldest = now.div_euclid(60_000) - ACTIVITY_KEPT_MINUTES;
        let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        for tally in tallies.into_iter().filter(|t| t.minute >= oldest) {
            let slots = counts
                .entry((tally.tenant, tally.minute))
                .or_insert([0; LATENCY_SLOTS]);
            for (total, n) in slots.iter_mut().zip(tally.slots) {
                *total += n;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(started_at: Millis, finished_at: Millis) -> StepTimes {
        StepTimes {
            name: "charge".into(),
            enqueued_at: None,
            started_at: Some(started_at),
            finished_at: Some(finished_at),
        }
    }

    #[test]
    fn counts_by_tenant_minute_and_slot_and_survives_a_failed_add() {
        let tallies = StepTallies::default();
        let acme = Namespace::parse("acme").unwrap();
        let globex = Namespace::parse("globex").unwrap();
        tallies.record(&acme, &step(60_000, 60_100)); // 0.1 s, minute 1
        tallies.record(&acme, &step(60_000, 60_100));
        tallies.record(&globex, &step(120_000, 121_500)); // 1.5 s, minute 2
        tallies.record(
            &globex,
            &StepTimes {
                started_at: None,
                ..step(0, 1)
            },
        );
        let mut taken = tallies.take();
        taken.sort_by_key(|t| t.minute);
        assert_eq!(taken.len(), 2);
        assert_eq!((&taken[0].tenant, taken[0].minute), (&acme, 1));
        assert_eq!(taken[0].slots[latency_slot(0.1)], 2);
        assert_eq!(taken[1].slots[latency_slot(1.5)], 1);
        assert!(tallies.take().is_empty());

        // A failed add puts them back; one older than the kept minutes is dropped.
        let now = 3 * 60_000;
        let mut old = taken[0].clone();
        old.minute = 3 - ACTIVITY_KEPT_MINUTES - 1;
        tallies.restore(vec![taken[0].clone(), old], now);
        tallies.record(&acme, &step(60_000, 60_100));
        let again = tallies.take();
        assert_eq!(again.len(), 1);
        assert_eq!(again[0].slots[latency_slot(0.1)], 3);
    }
}
