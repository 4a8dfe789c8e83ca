//! Remote workflow turns sent and not yet decided (aviary wire §3), by `taskId`: the remote
//! turn waits here for its decision, which the replies loop hands over when it arrives.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::Value;
use tokio::sync::{Notify, oneshot};

use crate::model::RunId;

/// A turn sent and not yet decided.
struct Waiter {
    run_id: RunId,
    answer: oneshot::Sender<Value>,
    beat: Arc<Notify>,
}

/// Turns sent and not yet decided, by `taskId`.
#[derive(Default)]
pub(crate) struct Awaiting {
    turns: Mutex<HashMap<String, Waiter>>,
}

/// The waiting side of one sent turn.
pub(crate) struct Pending {
    /// The decision, once it arrives.
    pub answer: oneshot::Receiver<Value>,
    /// Poked on every run beat while the worker replays the turn.
    pub beat: Arc<Notify>,
}

impl Awaiting {
    /// Registers turn `task_id` of `run_id`.
    pub fn insert(&self, task_id: String, run_id: RunId) -> Pending {
        let (answer, rx) = oneshot::channel();
        let beat = Arc::new(Notify::new());
        self.lock().insert(
            task_id,
            Waiter {
                run_id,
                answer,
                beat: beat.clone(),
            },
        );
        Pending { answer: rx, beat }
    }

    /// Forgets turn `task_id` (sent again, or given up).
    pub fn remove(&self, task_id: &str) {
        self.lock().remove(task_id);
    }

    /// Hands `decision` to the turn awaiting it; gives it back when none here does.
    pub fn deliver(&self, decision: Value) -> Result<(), Value> {
        let task_id = decision.get("taskId").and_then(Value::as_str);
        match task_id.and_then(|id| self.lock().remove(id)) {
            Some(waiter) => {
                // The turn may have stopped waiting (the engine is stopping): nothing to do.
                let _ = waiter.answer.send(decision);
                Ok(())
            }
            None => Err(decision),
        }
    }

    /// Notes a run beat: the turns of `run_id` awaited here wait a full silence window again.
    pub fn beat(&self, run_id: &RunId) {
        for waiter in self.lock().values().filter(|w| &w.run_id == run_id) {
            waiter.beat.notify_one();
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Waiter>> {
        self.turns.lock().unwrap_or_else(|p| p.into_inner())
    }
}
