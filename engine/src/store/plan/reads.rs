//! What both stores' reads aggregate alike: status counts in the statuses' order and each
//! namespace's load.
//!
//! One rule, two dialects: each store selects the rows in its SQL and hands them here.

use std::collections::BTreeMap;

use crate::model::{Namespace, NamespaceLoad, RunStatus, StatusCount};
use crate::store::{StoreError, StoreResult};

/// `(status, count)` rows as counts in [`RunStatus::ALL`]'s order.
pub(crate) fn status_counts(
    rows: impl IntoIterator<Item = (String, i64)>,
) -> StoreResult<Vec<StatusCount>> {
    let mut counts = rows
        .into_iter()
        .map(|(status, n)| {
            Ok(StatusCount {
                status: status
                    .parse::<RunStatus>()
                    .map_err(|e| StoreError::Corrupt(e.to_string()))?,
                count: n as u64,
            })
        })
        .collect::<StoreResult<Vec<_>>>()?;
    counts.sort_by_key(|c| RunStatus::ALL.iter().position(|s| *s == c.status));
    Ok(counts)
}

/// `(namespace, status, count)` rows as each namespace's load, by namespace: `failed` stands
/// for the recent failures (failed or dead) both stores count in a scan of their own.
pub(crate) fn namespace_loads(
    rows: impl IntoIterator<Item = (Option<String>, String, u64)>,
) -> Vec<NamespaceLoad> {
    let mut loads = BTreeMap::<String, NamespaceLoad>::new();
    for (ns, status, n) in rows {
        let namespace = Namespace::from_stored(ns.as_deref());
        let load = loads
            .entry(namespace.as_str().to_owned())
            .or_insert_with(|| NamespaceLoad {
                namespace,
                ..NamespaceLoad::default()
            });
        match status.as_str() {
            "pending" => load.pending += n,
            "running" | "cancelling" => load.running += n,
            "suspended" => load.suspended += n,
            "blocked" => load.blocked += n,
            "failed" => load.failed_recently += n,
            _ => {}
        }
    }
    loads.into_values().collect()
}
