//! Namespace scopes: reads and driver scans never cross a namespace, and rows written before
//! namespaces existed read as `default`.

use std::sync::Arc;

use super::support::{attempt_of, lease, new_run, ns, pending_step};
use crate::model::{Namespace, RunId, RunQuery, RunStatus, Scope};
use crate::store::{LostDispatch, Store, TurnCommit, TurnOutcome};

/// Reads through a namespace scope never see another namespace's runs or checkpoints.
pub async fn scoped_reads_never_cross_namespaces(store: Arc<dyn Store>) {
    store
        .create_run(new_run("a1", "acme"), 1, None)
        .await
        .expect("create");
    store
        .create_run(new_run("g1", "globex"), 2, None)
        .await
        .expect("create");
    let acme = Scope::Only(ns("acme"));
    let g1 = RunId::parse("g1").expect("id");
    assert!(
        store.get_run(&acme, &g1).await.expect("get").is_none(),
        "acme must not read a globex run"
    );
    assert!(
        store.checkpoints(&acme, &g1).await.expect("cps").is_empty(),
        "acme must not read globex checkpoints"
    );
    let page = store
        .list_runs(&acme, &RunQuery::default())
        .await
        .expect("list");
    assert_eq!(
        page.runs.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        vec!["a1"]
    );
    let counts = store.count_by_status(&acme).await.expect("counts");
    assert_eq!(
        counts.iter().map(|c| c.count).sum::<u64>(),
        1,
        "facets must be scoped too"
    );
    let all = store
        .list_runs(&Scope::All, &RunQuery::default())
        .await
        .expect("list all");
    assert_eq!(all.runs.len(), 2, "the operator sees every namespace");
    let claimed = store
        .claim_runs(&acme, "me", 10, 1000, 10, 5)
        .await
        .expect("claim");
    assert_eq!(
        claimed.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        vec!["a1"],
        "driver scans are scoped"
    );
}

/// Every driver scan (claims, the next wake-up, lost dispatches, the sweep) of a namespaced
/// engine sees only its namespace; the operator's sees all of them.
pub async fn driver_scans_stay_inside_their_namespace(store: Arc<dyn Store>) {
    let (acme, globex) = (Scope::Only(ns("acme")), Scope::Only(ns("globex")));
    for (id, namespace) in [("d-a", "acme"), ("d-g", "globex")] {
        let run = store
            .create_run(new_run(id, namespace), 1, Some(&lease("crashed")))
            .await
            .expect("create");
        let commit = TurnCommit {
            checkpoints: vec![pending_step(0)],
            ..TurnCommit::new(TurnOutcome::Suspend { wake_at: Some(500) })
        };
        store
            .commit_turn(
                &lease("crashed"),
                &run.id,
                attempt_of(&store, &run.id).await,
                commit,
                2,
            )
            .await
            .expect("commit")
            .expect("held");
    }
    assert_eq!(store.next_wake_at(&acme).await.expect("wake"), Some(500));
    let steps = store
        .pending_remote_steps(&globex, &LostDispatch::sent_before(100), 10)
        .await
        .expect("steps");
    assert_eq!(steps.len(), 1);
    assert_eq!(steps[0].checkpoint.run_id.as_str(), "d-g");
    assert_eq!(
        steps[0].namespace,
        ns("globex"),
        "a step sent again names its run's tenant"
    );
    let claimed = store
        .claim_runs(&acme, "acme-engine", 600, 50, 10, 5)
        .await
        .expect("claim");
    assert_eq!(
        claimed.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        ["d-a"],
        "an acme engine claims acme's due run only"
    );
    // acme's lease runs out with its engine gone; only a sweep in scope may bury it.
    let swept = store
        .sweep_abandoned(&globex, 0, 10_000)
        .await
        .expect("sweep");
    assert!(swept.iter().all(|r| r.namespace == ns("globex")));
    assert!(
        swept.iter().all(|r| r.id.as_str() != "d-a"),
        "a globex sweep never touches acme's runs"
    );
    let operator = store
        .claim_runs(&Scope::All, "operator", 600, 50, 10, 5)
        .await
        .expect("claim");
    assert_eq!(
        operator.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        ["d-g"],
        "the operator claims what is left, in any namespace"
    );
    let buried = store
        .sweep_abandoned(&acme, 0, 10_000)
        .await
        .expect("sweep");
    assert_eq!(
        buried
            .iter()
            .map(|r| (r.id.as_str(), r.status))
            .collect::<Vec<_>>(),
        [("d-a", RunStatus::Dead)],
        "the acme sweep buries acme's abandoned run, and not the operator's globex one"
    );
}

/// Rows written before namespaces were stamped (NULL or `''`) read back as `default`, match the
/// `default` filter and no other. Planting them takes raw SQL, so each backend passes
/// `execute_raw`; the statement is the same on both.
pub async fn legacy_null_and_empty_namespaces_read_as_default<F, Fut>(
    store: Arc<dyn Store>,
    execute_raw: F,
) where
    F: Fn(String) -> Fut,
    Fut: std::future::Future<Output = crate::store::StoreResult<u64>>,
{
    for (id, ns) in [("l-null", "NULL"), ("l-empty", "''")] {
        execute_raw(format!(
            "INSERT INTO runs (id, namespace, workflow, workflow_version, status, input, root_run_id, created_at, updated_at) \
             VALUES ('{id}', {ns}, 'wf', 1, 'completed', '{{}}', '{id}', 1, 1)"
        ))
        .await
        .expect("plant legacy row");
    }
    let default = Scope::Only(Namespace::default_ns());
    let page = store
        .list_runs(&default, &RunQuery::default())
        .await
        .expect("list");
    assert_eq!(page.runs.len(), 2, "legacy rows match the default filter");
    assert!(
        page.runs.iter().all(|r| r.namespace.is_default()),
        "and read back as default"
    );
    assert!(
        store
            .get_run(&default, &RunId::parse("l-null").expect("id"))
            .await
            .expect("get")
            .is_some()
    );
    assert!(
        store
            .list_runs(&Scope::Only(ns("acme")), &RunQuery::default())
            .await
            .expect("list")
            .runs
            .is_empty()
    );
}
