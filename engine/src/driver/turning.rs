//! Runs whose turns execute here, and the results that arrive before their steps are on record.
//!
//! When no other control plane shares the store, a turn's new remote steps leave while the
//! turn's commit is still in flight (a step's trip to a worker and back then overlaps the
//! commit instead of following it), so a fast worker's result can arrive before the store has
//! the step's checkpoint. Such a result is held here until the run's turns are over, then
//! applied as any other. While a run is listed here its lease is renewed.
//!
//! With peers, steps wait for their commit: a peer would take about half of the early results
//! off the shared queue, claim their runs while the sender's commits are queued, and lock the
//! same rows in another order (measured with two control planes: PostgreSQL deadlocks, and runs
//! left until their leases expired).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use crate::model::{RunId, StepResult};

/// Runs turning on this engine, each with the steps its turns sent ahead of their commits and
/// the results held for them.
#[derive(Default)]
pub(crate) struct Turning {
    runs: Mutex<HashMap<RunId, Entry>>,
}

#[derive(Default)]
struct Entry {
    /// Positions of steps sent before the commit that records them.
    early: Vec<u32>,
    /// Results of those steps that arrived while the run turned.
    held: Vec<StepResult>,
}

impl Turning {
    fn runs(&self) -> MutexGuard<'_, HashMap<RunId, Entry>> {
        self.runs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Lists `id` as turning here.
    pub fn begin(&self, id: &RunId) {
        self.runs().entry(id.clone()).or_default();
    }

    /// Notes that the steps at `seqs` of turning run `id` leave before their checkpoints are
    /// committed.
    pub fn send_early(&self, id: &RunId, seqs: impl IntoIterator<Item = u32>) {
        if let Some(entry) = self.runs().get_mut(id) {
            entry.early.extend(seqs);
        }
    }

    /// Keeps `result` if it answers a step its run sent early and the run is still turning
    /// here; otherwise hands it back to be applied now.
    pub fn hold(&self, result: StepResult) -> Option<StepResult> {
        let mut runs = self.runs();
        match runs.get_mut(&result.run_id) {
            Some(entry) if entry.early.contains(&result.seq) => {
                entry.held.push(result);
                None
            }
            _ => Some(result),
        }
    }

    /// Unlists `id`: its turns are over and every commit that sent a step early has returned.
    /// Returns the results held for it, to be applied now.
    pub fn end(&self, id: &RunId) -> Vec<StepResult> {
        self.runs().remove(id).map(|e| e.held).unwrap_or_default()
    }

    /// The runs turning here, whose leases must not lapse.
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
        }
    }

    #[test]
    fn holds_only_results_of_steps_sent_early_while_their_run_turns() {
        let turning = Turning::default();
        let (a, b) = (RunId::generate(), RunId::generate());
        turning.begin(&a);
        turning.send_early(&a, [1, 2]);
        // Not turning here, or not sent early: applied at once.
        assert!(turning.hold(result(&b, 1)).is_some());
        assert!(turning.hold(result(&a, 0)).is_some());
        assert!(turning.hold(result(&a, 2)).is_none());
        assert_eq!(turning.ids(), vec![a.clone()]);
        let held = turning.end(&a);
        assert_eq!(held.iter().map(|r| r.seq).collect::<Vec<_>>(), vec![2]);
        // Once the run's turns are over, nothing is held for it.
        assert!(turning.hold(result(&a, 1)).is_some());
        assert!(turning.ids().is_empty());
    }
}
