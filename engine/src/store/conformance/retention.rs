//! Retention: only whole families of the named tenant whose every run ended before the cut
//! are deleted, with their checkpoints, while other runs are being written; the counts follow
//! and the totals stay.

use std::sync::Arc;

use super::support::{lease, move_run, new_run, ns, suspend_on_step};
use crate::model::{RunId, RunStatus, Scope};
use crate::store::{NewRun, Store};

/// Expired families of one tenant go, in batches, and nothing else does: not a family with a
/// run still live or ended since, not a continued run whose successor lives, not another
/// tenant's, not the runs started meanwhile.
pub async fn pruning_deletes_only_expired_families_of_the_tenant(store: Arc<dyn Store>) {
    let id = |s: &str| RunId::parse(s).expect("id");
    let finish = async |run: &str, status: RunStatus, at: i64| {
        let live = [RunStatus::Pending, RunStatus::Running, RunStatus::Suspended];
        move_run(&store, run, &live, status, at).await;
    };
    let child_of = |parent: &str, child: &str| NewRun {
        parent_run_id: Some(id(parent)),
        root_run_id: id(parent),
        ..new_run(child, "acme")
    };
    // Expired: old1 alone; old2 with a child, both ended long ago. It has a checkpoint.
    for run in ["old1", "old2", "mixed", "recent", "live", "chain"] {
        store
            .create_run(new_run(run, "acme"), 10, None)
            .await
            .expect("create");
    }
    store
        .create_run(child_of("old2", "old2.child.0"), 10, Some(&lease("a")))
        .await
        .expect("child");
    let attempt = super::attempt_of(&store, &id("old2.child.0")).await;
    store
        .commit_turn(
            &lease("a"),
            &id("old2.child.0"),
            attempt,
            suspend_on_step(1),
            20,
        )
        .await
        .expect("commit")
        .expect("committed");
    store
        .create_run(child_of("mixed", "mixed.child.0"), 10, None)
        .await
        .expect("child");
    // A continued run and its live successor share a root.
    store
        .create_run(
            NewRun {
                continued_from: Some(id("chain")),
                root_run_id: id("chain"),
                ..new_run("chain.next", "acme")
            },
            10,
            None,
        )
        .await
        .expect("successor");
    store
        .create_run(new_run("g-old", "globex"), 10, None)
        .await
        .expect("globex");
    finish("old1", RunStatus::Completed, 100).await;
    finish("old2", RunStatus::Failed, 100).await;
    finish("old2.child.0", RunStatus::Cancelled, 90).await;
    finish("mixed", RunStatus::Completed, 100).await;
    finish("recent", RunStatus::Completed, 5_000).await;
    finish("chain", RunStatus::Continued, 100).await;
    finish("g-old", RunStatus::Completed, 100).await;
    let started_before = store.run_totals(&Scope::All).await.expect("totals");

    assert!(
        !store
            .checkpoints(&Scope::All, &id("old2.child.0"))
            .await
            .expect("read")
            .is_empty(),
        "the expired child has a checkpoint to lose"
    );
    let acme = ns("acme");
    assert_eq!(
        store.prunable_runs(&acme, 1_000).await.expect("dry run"),
        3,
        "old1, old2 and its child"
    );
    // Runs keep being written while the families go, one family per batch.
    let writer = {
        let store = store.clone();
        tokio::spawn(async move {
            for i in 0..20 {
                store
                    .create_run(new_run(&format!("w{i}"), "acme"), 2_000, None)
                    .await
                    .expect("a run written meanwhile");
                tokio::task::yield_now().await;
            }
        })
    };
    let mut deleted = 0;
    loop {
        let n = store.prune_runs(&acme, 1_000, 1).await.expect("prune");
        assert!(n <= 2, "one family per batch: {n}");
        deleted += n;
        if n == 0 {
            break;
        }
    }
    writer.await.expect("writer");
    assert_eq!(deleted, 3);

    for gone in ["old1", "old2", "old2.child.0"] {
        assert!(
            store
                .get_run(&Scope::All, &id(gone))
                .await
                .expect("read")
                .is_none(),
            "{gone} is deleted"
        );
        assert!(
            store
                .checkpoints(&Scope::All, &id(gone))
                .await
                .expect("read")
                .is_empty(),
            "{gone}'s checkpoints go with it"
        );
    }
    for kept in [
        "mixed",
        "mixed.child.0",
        "recent",
        "live",
        "chain",
        "chain.next",
        "g-old",
        "w0",
        "w19",
    ] {
        assert!(
            store
                .get_run(&Scope::All, &id(kept))
                .await
                .expect("read")
                .is_some(),
            "{kept} is kept"
        );
    }
    assert_eq!(store.prunable_runs(&acme, 1_000).await.expect("dry run"), 0);
    assert_eq!(
        store
            .prunable_runs(&ns("globex"), 1_000)
            .await
            .expect("dry run"),
        1,
        "globex's own expired run waits for globex's retention"
    );

    // The counts follow the deletion; the totals do not drop.
    store.fold_counts().await.expect("fold");
    let counts = store
        .count_by_status(&Scope::Only(acme.clone()))
        .await
        .expect("counts");
    let total: u64 = counts.iter().map(|c| c.count).sum();
    assert_eq!(
        total,
        6 + 20,
        "acme's kept runs and the ones written meanwhile"
    );
    assert!(
        !counts
            .iter()
            .any(|c| c.status == RunStatus::Failed || c.status == RunStatus::Cancelled),
        "the deleted runs are no longer counted: {counts:?}"
    );
    let started_after = store.run_totals(&Scope::All).await.expect("totals");
    for before in &started_before {
        let after = started_after
            .iter()
            .find(|t| t.namespace == before.namespace && t.workflow == before.workflow)
            .expect("still there");
        assert!(after.started >= before.started, "{after:?} < {before:?}");
        assert_eq!(after.finished, before.finished, "finished totals stay");
    }
}
