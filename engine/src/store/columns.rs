//! The column lists every backend selects first and in this order, so rows are read by
//! position (a by-name lookup scans every column name).

/// A run's columns.
pub(crate) const RUN_COLS: &str = "id, namespace, workflow, workflow_version, status, input, \
    output, error, tags, search_attributes, parent_run_id, root_run_id, nesting_depth, retry_of, \
    continued_from, attempt, wake_at, locked_by, locked_until, created_at, updated_at, finished_at";

/// How many columns [`RUN_COLS`] names; a statement's own columns after them start here.
pub(crate) const RUN_COL_COUNT: usize = 22;

/// A checkpoint's columns.
pub(crate) const CHECKPOINT_COLS: &str = "run_id, seq, kind, name, status, attempts, \
    worker_group, input, output, error, wake_at, enqueued_at, started_at, finished_at, \
    retry_policy, timeout_ms";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_col_count_counts_run_cols() {
        assert_eq!(RUN_COLS.split(',').count(), RUN_COL_COUNT);
    }
}
