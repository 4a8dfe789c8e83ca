//! What both stores' activity minutes share: the key a scope's minutes are kept under, and
//! folding the selected rows into [`ActivityMinute`]s.
//!
//! One rule, two dialects: each store selects the rows in its SQL and hands them here.

use std::collections::BTreeMap;

use crate::model::{ActivityMinute, LATENCY_SLOTS, Scope, StepTally};

/// The `namespace` key of the minutes over every tenant: not a valid namespace, so no tenant's
/// minutes can be read as everyone's.
pub(crate) const EVERY_TENANT: &str = "*";

/// The key `scope`'s minutes are kept under: its tenant's name, or [`EVERY_TENANT`].
pub(crate) fn scope_key(scope: &Scope) -> String {
    match scope.namespace() {
        Some(ns) => ns.as_str().to_owned(),
        None => EVERY_TENANT.to_owned(),
    }
}

/// `(minute, event, n)` run rows and `(minute, slot, n)` step rows as minutes, oldest first.
/// A slot past the last is counted in the last (a longer bucket list than this build knows), a
/// negative one in the first.
pub(crate) fn minutes(
    runs: impl IntoIterator<Item = (i64, String, i64)>,
    steps: impl IntoIterator<Item = (i64, i64, i64)>,
) -> Vec<ActivityMinute> {
    let mut by_minute: BTreeMap<i64, ActivityMinute> = BTreeMap::new();
    for (minute, event, n) in runs {
        by_minute
            .entry(minute)
            .or_insert_with(|| ActivityMinute::at(minute))
            .count_run(&event, n.max(0) as u64);
    }
    for (minute, slot, n) in steps {
        let slot = usize::try_from(slot).unwrap_or(0).min(LATENCY_SLOTS - 1);
        by_minute
            .entry(minute)
            .or_insert_with(|| ActivityMinute::at(minute))
            .steps[slot] += n.max(0) as u64;
    }
    by_minute.into_values().collect()
}

/// The `(namespace, minute, slot, n)` rows `tallies` add: each tenant's and every tenant's
/// together, zeros left out, in key order (so concurrent adders lock rows in one order).
pub(crate) fn step_rows(tallies: &[StepTally]) -> Vec<(String, i64, i64, i64)> {
    let mut rows: BTreeMap<(String, i64, i64), i64> = BTreeMap::new();
    for tally in tallies {
        for (slot, n) in tally.slots.iter().enumerate() {
            if *n == 0 {
                continue;
            }
            let n = i64::try_from(*n).unwrap_or(i64::MAX);
            for key in [tally.tenant.as_str(), EVERY_TENANT] {
                let total = rows
                    .entry((key.to_owned(), tally.minute, slot as i64))
                    .or_default();
                *total = total.saturating_add(n);
            }
        }
    }
    rows.into_iter()
        .map(|((ns, minute, slot), n)| (ns, minute, slot, n))
        .collect()
}
