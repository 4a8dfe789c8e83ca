//! The activity minutes: runs started and finished are counted in their minute, per tenant and
//! over every tenant, by the store itself; step tallies add up; old minutes are pruned.

use std::sync::Arc;

use super::support::{move_run, new_run, ns};
use crate::model::{ActivityMinute, LATENCY_SLOTS, RunStatus, Scope, StepTally};
use crate::store::Store;

const MINUTE: i64 = 60_000;

/// Starts and ends land in the minute they happened, in their tenant's minutes and everyone's;
/// a continued run is neither a completion nor a failure; tallies from two engines add up; a
/// tenant reads only its own minutes; pruning deletes only the old ones.
pub async fn activity_minutes_count_runs_and_steps_by_tenant(store: Arc<dyn Store>) {
    for (run, tenant) in [
        ("a1", "acme"),
        ("a2", "acme"),
        ("a3", "acme"),
        ("a4", "acme"),
    ] {
        store
            .create_run(new_run(run, tenant), MINUTE + 5, None)
            .await
            .expect("create");
    }
    store
        .create_run(new_run("g1", "globex"), 2 * MINUTE, None)
        .await
        .expect("create");
    let finish = async |run: &str, status: RunStatus, at: i64| {
        move_run(&store, run, &[RunStatus::Pending], status, at).await;
    };
    finish("a1", RunStatus::Completed, 3 * MINUTE).await;
    finish("a2", RunStatus::Failed, 3 * MINUTE + 59_999).await;
    finish("a3", RunStatus::Cancelled, 4 * MINUTE).await;
    finish("a4", RunStatus::Continued, 4 * MINUTE).await;
    finish("g1", RunStatus::Dead, 4 * MINUTE).await;
    let tally = |tenant: &str, minute: i64, slot: usize, n: u64| {
        let mut slots = [0; LATENCY_SLOTS];
        slots[slot] = n;
        StepTally {
            tenant: ns(tenant),
            minute,
            slots,
        }
    };
    // Two engines add what each recorded.
    store
        .add_step_tallies(&[tally("acme", 3, 2, 5), tally("globex", 3, 2, 1)])
        .await
        .expect("add");
    store
        .add_step_tallies(&[tally("acme", 3, 2, 5), tally("acme", 4, 9, 1)])
        .await
        .expect("add");
    store.fold_counts().await.expect("fold");

    let minute = |m: i64, runs: [u64; 4], steps: &[(usize, u64)]| {
        let mut minute = ActivityMinute::at(m);
        [
            minute.started,
            minute.completed,
            minute.failed,
            minute.cancelled,
        ] = runs;
        for (slot, n) in steps {
            minute.steps[*slot] = *n;
        }
        minute
    };
    let acme = Scope::Only(ns("acme"));
    assert_eq!(
        store.activity(&acme, 0).await.expect("read"),
        vec![
            minute(1, [4, 0, 0, 0], &[]),
            minute(3, [0, 1, 1, 0], &[(2, 10)]),
            minute(4, [0, 0, 0, 1], &[(9, 1)]),
        ]
    );
    assert_eq!(
        store.activity(&Scope::All, 0).await.expect("read"),
        vec![
            minute(1, [4, 0, 0, 0], &[]),
            minute(2, [1, 0, 0, 0], &[]),
            minute(3, [0, 1, 1, 0], &[(2, 11)]),
            minute(4, [0, 0, 1, 1], &[(9, 1)]),
        ]
    );
    assert_eq!(
        store
            .activity(&Scope::Only(ns("globex")), 3)
            .await
            .expect("read"),
        vec![
            minute(3, [0, 0, 0, 0], &[(2, 1)]),
            minute(4, [0, 0, 1, 0], &[])
        ],
        "from minute 3 on, globex's own"
    );
    assert!(
        store
            .activity(&Scope::Only(ns("initech")), 0)
            .await
            .expect("read")
            .is_empty()
    );

    let gone = store.prune_activity(4).await.expect("prune");
    assert!(gone > 0);
    assert_eq!(
        store.activity(&acme, 0).await.expect("read"),
        vec![minute(4, [0, 0, 0, 1], &[(9, 1)])],
        "only the minutes before 4 are gone"
    );
}
