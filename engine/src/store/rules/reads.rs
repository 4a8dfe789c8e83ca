//! What both stores' reads share: status counts in the statuses' order, each namespace's load,
//! and the slots held by steps out.
//!
//! One rule, two dialects: each store selects the rows in its SQL and hands them here.

use std::collections::BTreeMap;

use super::statement::Statement;
use crate::model::{Namespace, NamespaceLoad, RunCount, RunStatus, RunTotals, Scope, StatusCount};
use crate::store::columns::{CHECKPOINT_COLS, qualified};
use crate::store::{LostDispatch, StoreError, StoreResult};

/// The remote steps out now that hold concurrency slots, of runs still live: the slots the sweep
/// renews. Its conditions are those of the `checkpoints_slots_out` partial index, which holds
/// only these rows. The caller adds its scope on `r.namespace` and a `LIMIT`.
pub(crate) const SLOTS_OUT: &str = "SELECT c.run_id, c.seq, c.slot, r.namespace AS run_namespace \
    FROM checkpoints c JOIN runs r ON r.id = c.run_id \
    WHERE c.slot IS NOT NULL AND c.status IN ('pending', 'running') AND c.enqueued_at IS NOT NULL \
    AND r.status IN ('pending', 'running', 'suspended', 'blocked')";

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

/// `(namespace, workflow, status, count)` rows as [`RunCount`]s.
pub(crate) fn run_counts(
    rows: impl IntoIterator<Item = (String, String, String, i64)>,
) -> StoreResult<Vec<RunCount>> {
    rows.into_iter()
        .map(|(namespace, workflow, status, n)| {
            Ok(RunCount {
                namespace: Namespace::from_stored(Some(&namespace)),
                workflow,
                status: status
                    .parse::<RunStatus>()
                    .map_err(|e| StoreError::Corrupt(e.to_string()))?,
                count: n.max(0) as u64,
            })
        })
        .collect()
}

/// `(namespace, workflow, event, count)` rows as [`RunTotals`] by namespace and workflow:
/// `event` is `started` or the final status runs reached.
pub(crate) fn run_totals(
    rows: impl IntoIterator<Item = (String, String, String, i64)>,
) -> StoreResult<Vec<RunTotals>> {
    let mut totals = BTreeMap::<(String, String), RunTotals>::new();
    for (namespace, workflow, event, n) in rows {
        let n = n.max(0) as u64;
        let total = totals
            .entry((namespace.clone(), workflow.clone()))
            .or_insert_with(|| RunTotals {
                namespace: Namespace::from_stored(Some(&namespace)),
                workflow,
                ..RunTotals::default()
            });
        if event == "started" {
            total.started += n;
        } else {
            let status = event
                .parse::<RunStatus>()
                .map_err(|e| StoreError::Corrupt(e.to_string()))?;
            total.finished.push(StatusCount { status, count: n });
        }
    }
    let mut totals: Vec<RunTotals> = totals.into_values().collect();
    for total in &mut totals {
        total
            .finished
            .sort_by_key(|c| RunStatus::ALL.iter().position(|s| *s == c.status));
    }
    Ok(totals)
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
/// [`crate::store::Store::pending_remote_steps`]' statement: the [`CHECKPOINT_COLS`] and the
/// run's namespace (`run_namespace`) of at most `limit` remote steps in `scope` with no result
/// whose dispatch may be lost (see [`LostDispatch`]), oldest sent first.
pub(crate) fn pending_remote_steps(
    sql: &mut impl Statement,
    scope: &Scope,
    lost: &LostDispatch,
    limit: u32,
) {
    let cols = qualified(CHECKPOINT_COLS, "c");
    sql.push(&format!(
        "SELECT {cols}, r.namespace AS run_namespace FROM checkpoints c JOIN runs r ON r.id = c.run_id \
         WHERE c.kind = 'remote_step' AND c.status = 'pending' \
         AND r.status IN ('suspended', 'running') AND ((c.enqueued_at <= "
    ))
    .bind_int(lost.sent_before);
    if let Some(owner) = &lost.only_sent_by {
        sql.push(" AND c.dispatched_by = ").bind_text(owner.clone());
    }
    // A retry waiting out its backoff is the turn's to send; this is only the safety net.
    sql.push(") OR (c.enqueued_at IS NULL AND (c.wake_at IS NULL OR c.wake_at <= ")
        .bind_int(lost.sent_before)
        .push("))");
    if let Some(now) = lost.senders_gone_at {
        sql.push(
            " OR (c.enqueued_at IS NOT NULL AND NOT EXISTS (SELECT 1 FROM drivers d \
             WHERE d.owner = c.dispatched_by AND d.alive_until > ",
        )
        .bind_int(now)
        .push("))");
    }
    sql.push(")")
        .scope("r.namespace", scope)
        .push(" ORDER BY c.enqueued_at LIMIT ")
        .bind_int(i64::from(limit));
}
