//! The column lists every backend selects first and in this order, so rows are read by
//! position (a by-name lookup scans every column name).

use crate::model::ConcurrencySlot;

/// A run's columns.
pub(crate) const RUN_COLS: &str = "id, namespace, workflow, workflow_version, status, input, \
    output, error, tags, search_attributes, parent_run_id, root_run_id, nesting_depth, retry_of, \
    continued_from, attempt, wake_at, locked_by, locked_until, created_at, updated_at, finished_at, \
    concurrency_key, concurrency_limit, admitted_attempt, deadline_at, traceparent";

/// How many columns [`RUN_COLS`] names; a statement's own columns after them start here.
#[cfg(any(test, feature = "postgres"))]
pub(crate) const RUN_COL_COUNT: usize = 27;

/// A checkpoint's columns.
pub(crate) const CHECKPOINT_COLS: &str = "run_id, seq, kind, name, status, attempts, \
    worker_group, input, output, error, wake_at, enqueued_at, started_at, finished_at, \
    retry_policy, timeout_ms, priority, slot, saga, route";

/// `cols` (one of the lists above) with each column prefixed by `table.`, for a statement that
/// joins another table.
pub(crate) fn qualified(cols: &str, table: &str) -> String {
    cols.split(',')
        .map(|c| format!("{table}.{}", c.trim()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A run's concurrency slot from its `concurrency_key` and `concurrency_limit` columns.
pub(crate) fn concurrency_slot(key: Option<String>, limit: Option<i64>) -> Option<ConcurrencySlot> {
    Some(ConcurrencySlot {
        key: key?,
        limit: u32::try_from(limit?).unwrap_or(1).max(1),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_col_count_counts_run_cols() {
        assert_eq!(RUN_COLS.split(',').count(), RUN_COL_COUNT);
    }

    #[test]
    fn qualified_prefixes_every_column() {
        assert_eq!(
            qualified(CHECKPOINT_COLS, "c")
                .split(", ")
                .collect::<Vec<_>>(),
            CHECKPOINT_COLS
                .split(", ")
                .map(|c| format!("c.{c}"))
                .collect::<Vec<_>>()
        );
    }
}
