//! A run's history as it is exported (`GET /api/v1/runs/{id}/history`, `durable run history`,
//! the run page's download): one versioned JSON document a program can read back.

use serde::{Deserialize, Serialize};

use super::{Checkpoint, Millis, Run, RunDetail};

/// The shape's name and version: a change that breaks a reader of it gets a new number.
pub const HISTORY_FORMAT: &str = "durable.run-history/1";

/// A run and every checkpoint it recorded, in order.
///
/// ```json
/// {"format": "durable.run-history/1", "exported_at": 1796000000000,
///  "run": {"id": "…", "namespace": "acme", "workflow": "demo.order", "status": "completed", …},
///  "checkpoints": [{"seq": 0, "kind": "remote_step", "name": "order.reserve",
///                   "status": "completed", "output": {…}, …}, …]}
/// ```
///
/// `run` is what `GET /api/v1/runs/{id}` answers as `run`; each checkpoint, one of its
/// `checkpoints` (a step, a timer, a signal wait, a child, a recorded side effect), with its
/// input, output or error and its times.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunHistory {
    /// [`HISTORY_FORMAT`].
    pub format: String,
    /// When it was exported, in epoch milliseconds.
    pub exported_at: Millis,
    /// The run.
    pub run: Run,
    /// Its checkpoints, by position.
    pub checkpoints: Vec<Checkpoint>,
}

impl RunHistory {
    /// A run's history (its detail, as `GET /api/v1/runs/{id}` reads it) as of `now`.
    pub fn new(detail: RunDetail, now: Millis) -> Self {
        RunHistory {
            format: HISTORY_FORMAT.to_owned(),
            exported_at: now,
            run: detail.run,
            checkpoints: detail.checkpoints,
        }
    }
}
