//! The in-flight registry: runs this engine is working on, and the step results that arrive
//! for them meanwhile.
//!
//! A run is listed here while one of its turns executes (its lease is then renewed) and while a
//! result of it is being applied. A result that arrives for a listed run is held, and applied
//! once the run is no longer listed, or taken by the run's turn while its commit is in flight
//! (see [`super::ahead`]), so nothing this engine does to a run races with anything else it does
//! to it:
//!
//! - When no other control plane shares the store, and the turn would make the same steps if
//!   it were computed again (see `turn::execute::replays_alike`), a turn's new remote steps leave while
//!   the turn's commit is still in flight (a step's trip to a worker and back then overlaps the
//!   commit instead of following it), so a fast worker's result can arrive before the store has
//!   the step's checkpoint. Held, it finds the step on record.
//! - Another result of the run would otherwise be recorded (or turned) beside the turn in
//!   flight, and the store would refuse one of the two writes; a refused turn's early steps
//!   would have left for nothing, and run twice.
//!
//! With peers, steps wait for their commit: a peer would take about half of the early results
//! off the shared queue and have to wait for the sender's commits (measured with two control
//! planes: runs 1–5 ms slower, PostgreSQL lock waits and deadlocks when the peer wrote for them,
//! runs left until their leases expired). A peer that joins is noticed within about a second
//! (see `loops::lease`); until then, a peer that takes an early result reads, finds the step
//! not on record, writes nothing, and tries again (see `loops::results`).
//!
//! What it saves: a step's trip to a worker and back overlaps the commit that records it
//! instead of following it (the `cluster` bench's one-at-a-time latency; bench/HISTORY.md,
//! session 11).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;

use crate::model::{RunId, StepResult};

/// Runs listed on this engine, each with the results held for it.
#[derive(Default)]
pub(crate) struct InFlight {
    runs: Mutex<HashMap<RunId, Entry>>,
}

#[derive(Default)]
struct Entry {
    /// How many listings hold the run: a result being applied hands it to the turn it starts.
    listings: u32,
    /// Results that arrived while the run was listed, oldest first.
    held: VecDeque<StepResult>,
    /// Told of each result held, so a turn whose commit is in flight can take it at once (see
    /// [`InFlight::take_held`]).
    arrived: Arc<Notify>,
}

impl InFlight {
    fn runs(&self) -> MutexGuard<'_, HashMap<RunId, Entry>> {
        self.runs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Lists `id` (once more): a turn of it executes here.
    pub fn begin(&self, id: &RunId) {
        self.runs().entry(id.clone()).or_default().listings += 1;
    }

    /// Lists the run of `result` and hands the result back for the caller to apply, unless the
    /// run is listed already: then the result is held.
    pub fn begin_applying(&self, result: StepResult) -> Option<StepResult> {
        let mut runs = self.runs();
        let entry = runs.entry(result.run_id.clone()).or_default();
        if entry.listings > 0 {
            entry.held.push_back(result);
            entry.arrived.notify_one();
            return None;
        }
        entry.listings = 1;
        Some(result)
    }

    /// Ends one listing of `id`. Once none is left, returns the results held for it, to be
    /// applied now.
    pub fn end(&self, id: &RunId) -> Vec<StepResult> {
        let mut runs = self.runs();
        let Some(entry) = runs.get_mut(id) else {
            return Vec::new();
        };
        entry.listings = entry.listings.saturating_sub(1);
        if entry.listings > 0 {
            return Vec::new();
        }
        runs.remove(id).map(|e| e.held.into()).unwrap_or_default()
    }

    /// What tells of results held for listed run `id`; `None` if the run is not listed. It
    /// keeps one wake-up, not one per result, so a waiter looks at what is held (see
    /// [`InFlight::take_held`]) before each wait.
    pub fn arrivals(&self, id: &RunId) -> Option<Arc<Notify>> {
        self.runs().get(id).map(|e| e.arrived.clone())
    }

    /// Takes the oldest result held for `id`, for a turn of it to apply now.
    pub fn take_held(&self, id: &RunId) -> Option<StepResult> {
        self.runs().get_mut(id)?.held.pop_front()
    }

    /// Holds `result` again, ahead of the others (a turn took it, then could not apply it).
    /// Its run must still be listed, as the caller's turn keeps it; otherwise the result is
    /// handed back. Nobody is told: a turn of the run looks at what is held before it waits.
    pub fn hold_again(&self, result: StepResult) -> Option<StepResult> {
        match self.runs().get_mut(&result.run_id) {
            Some(entry) if entry.listings > 0 => {
                entry.held.push_front(result);
                None
            }
            _ => Some(result),
        }
    }

    /// The runs listed here, whose leases (if this engine holds them) must not lapse.
    pub fn ids(&self) -> Vec<RunId> {
        self.runs().keys().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{StepOutcome, step_id};

    fn result(run: &RunId, seq: u32) -> StepResult {
        StepResult {
            run_id: run.clone(),
            seq,
            step_id: step_id(run, seq),
            outcome: StepOutcome::Completed {
                output: serde_json::json!(seq),
            },
            started_at: None,
            receipt: Default::default(),
        }
    }

    #[test]
    fn holds_results_of_a_run_until_its_last_listing_ends() {
        let in_flight = InFlight::default();
        let (a, b) = (RunId::generate(), RunId::generate());
        // Applying a's result lists a; the turn it starts lists a again.
        assert!(in_flight.begin_applying(result(&a, 0)).is_some());
        in_flight.begin(&a);
        // Another run's result is applied at once; a's next ones wait.
        assert!(in_flight.begin_applying(result(&b, 1)).is_some());
        assert!(in_flight.begin_applying(result(&a, 1)).is_none());
        assert!(in_flight.begin_applying(result(&a, 2)).is_none());
        assert_eq!(in_flight.end(&b).len(), 0);
        assert_eq!(in_flight.ids(), vec![a.clone()]);
        assert!(in_flight.end(&a).is_empty(), "the turn still holds a");
        let held = in_flight.end(&a);
        assert_eq!(held.iter().map(|r| r.seq).collect::<Vec<_>>(), vec![1, 2]);
        // Once nothing lists the run, its results are applied at once.
        assert!(in_flight.begin_applying(result(&a, 3)).is_some());
        assert_eq!(in_flight.end(&a).len(), 0);
        assert!(in_flight.ids().is_empty());
    }
}
