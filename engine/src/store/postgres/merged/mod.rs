//! Writes of many runs in one statement each, for the group commit to merge (see
//! [`super::writer::Writer::write_merged`]).
//!
//! PostgreSQL spends far more CPU around a small statement (planning, executor start-up, its own
//! round of locks) than inside it, so in a burst the writes every run makes share statements:
//! every parameter of the one-run statement becomes an array with an element per run
//! (`… FROM unnest(…)`), and each run is written exactly as the one-run statement writes it.

mod results;
mod starts;

pub(super) use results::{apply_result_and_commit, apply_results_and_commit, run_of};
pub(super) use starts::{create_run_and_commit, create_runs_and_commit, id_of};

use super::values::{CheckpointValues, unnest};
use crate::store::{StoreError, StoreResult};

/// Each merged write's outcome, in order, or why their statement failed (see
/// [`super::writer::MergedBody`]).
type Outcomes<T> = StoreResult<Vec<StoreResult<Option<T>>>>;

/// `writes` outcomes that each failed with `e`: what a merged statement that wrote, but whose
/// answer could not be read, tells every write (none may be tried again: it may stand).
fn each_failed<T>(writes: usize, e: &StoreError) -> Vec<StoreResult<T>> {
    (0..writes)
        .map(|_| Err(StoreError::Corrupt(format!("a merged write's answer: {e}"))))
        .collect()
}

/// `INSERT INTO checkpoints` of the new checkpoints bound as arrays from `$first` (see
/// [`super::values::CheckpointArrays`]), only those of runs the statement's `r` returned; a
/// checkpoint already at its position is kept.
fn insert_checkpoints(first: usize) -> String {
    format!(
        "INSERT INTO checkpoints ({}) SELECT n.* FROM {} WHERE n.run_id IN (SELECT id FROM r) \
         ON CONFLICT (run_id, seq) DO NOTHING",
        CheckpointValues::COLUMNS.join(", "),
        unnest(
            CheckpointValues::COLUMNS,
            CheckpointValues::TYPES,
            first,
            "n"
        )
    )
}
