//! Sagas: a step may name the step that undoes it; when its run fails, or is cancelled with
//! compensation, the undoing steps of its completed steps run newest first, each a durable
//! step with its own retries, and the run ends `compensated` or `compensation_failed`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A step's part in a saga, kept on its checkpoint.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Saga {
    /// What undoes this step, should the run fail or be cancelled with compensation.
    Undo {
        /// The compensating step.
        step: String,
        /// Its input.
        input: Value,
    },
    /// This step undoes the step at this position.
    Undoes(u32),
}

/// The signal a cancel with compensation leaves for a run: its next turn runs no more of the
/// workflow and compensates instead. Callers cannot send it (names under `durable.` are the
/// engine's).
pub const COMPENSATE_SIGNAL: &str = "durable.compensate";
