//! Parked histories (the sticky cache): runs this engine last suspended, with the history they
//! suspended with.
//!
//! When a step result arrives for one of them, the engine applies the result to the cached
//! history, replays the next turn in memory and persists "result + turn" in one write
//! ([`crate::store::Store::apply_result_and_commit`]) instead of three (apply, claim, commit)
//! plus a read. The store only accepts that write if nobody touched the run since it was cached,
//! so a stale entry costs a wasted turn, never a wrong one.
//!
//! A run that is not cached here (another control plane parked it, or the cache forgot it) takes
//! the same path from the store: its row, then its history, are read, and the same write is
//! made (see `loops::results`).
//!
//! What it saves: per step result, a read of the history and two of three writes. The `embedded`
//! bench shows it (bench/HISTORY.md, before session 4: the "+ sticky fast path" column).

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard};

use crate::model::{CheckpointKind, CheckpointStatus, Millis, Run, RunId, StepOutcome, StepResult};
use crate::store::History;

/// How many suspended runs are remembered; the oldest are forgotten first.
const CAPACITY: usize = 4096;

/// A run as this engine last left it.
#[derive(Clone, Debug)]
pub(crate) struct Parked {
    /// The run right after its last commit (its `attempt` is the compare-and-set version).
    pub run: Run,
    /// Its history right after that commit.
    pub history: History,
}

#[derive(Default)]
pub(crate) struct ParkedRuns {
    entries: Mutex<Entries>,
}

#[derive(Default)]
struct Entries {
    parked: HashMap<RunId, Parked>,
    order: VecDeque<RunId>,
}

impl ParkedRuns {
    fn entries(&self) -> MutexGuard<'_, Entries> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Remembers `run` as just suspended with `history`.
    pub fn park(&self, run: Run, history: History) {
        let mut e = self.entries();
        let id = run.id.clone();
        if e.parked
            .insert(id.clone(), Parked { run, history })
            .is_none()
        {
            e.order.push_back(id);
        }
        while e.parked.len() > CAPACITY {
            match e.order.pop_front() {
                Some(old) => {
                    e.parked.remove(&old);
                }
                None => break,
            }
        }
    }

    /// Takes the run out (whoever takes it turns it next, or lets it go).
    pub fn take(&self, id: &RunId) -> Option<Parked> {
        let mut e = self.entries();
        let parked = e.parked.remove(id)?;
        // The id stays in `order` until it reaches the front; `park` re-adds it if needed.
        if e.order.len() > 2 * CAPACITY {
            let Entries { parked: map, order } = &mut *e;
            order.retain(|id| map.contains_key(id));
        }
        Some(parked)
    }
}

/// The history with a completed step's `result` recorded as the store records it, or `None`
/// when the cached history does not expect this result (a duplicate, a failure, a retry).
pub(crate) fn with_result(
    mut history: History,
    result: &StepResult,
    now: Millis,
) -> Option<History> {
    let StepOutcome::Completed { output } = &result.outcome else {
        return None;
    };
    let cp = history
        .checkpoints
        .iter_mut()
        .find(|c| c.seq == result.seq)?;
    // A step holding concurrency slots is recorded the ordinary way, which gives them back.
    if cp.kind != CheckpointKind::RemoteStep
        || cp.status != CheckpointStatus::Pending
        || cp.slot.is_some()
    {
        return None;
    }
    cp.status = CheckpointStatus::Completed;
    cp.output = Some(output.clone());
    cp.finished_at = Some(now);
    cp.started_at = result.started_at.or(cp.started_at);
    Some(history)
}
