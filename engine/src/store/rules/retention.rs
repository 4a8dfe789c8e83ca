//! What both stores' retention shares: the final statuses, as SQL. A family is deleted only
//! when every run in it has one of them and ended before the cut.

use crate::model::RunStatus;

/// `'completed', 'failed', …`: the statuses a run ends in ([`RunStatus::is_terminal`]).
pub(crate) fn final_statuses() -> String {
    RunStatus::ALL
        .iter()
        .filter(|s| s.is_terminal())
        .map(|s| format!("'{}'", s.as_str()))
        .collect::<Vec<_>>()
        .join(", ")
}
