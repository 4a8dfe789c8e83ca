//! Plans and fair claims: plans round-trip, usage is counted from the runs, what waits is read
//! round robin between tenants and their workflows, and a claim under a concurrency ceiling
//! starts no more than the ceiling allows.

use std::sync::Arc;

use serde_json::json;

use super::support::{new_run, ns};
use crate::model::{Plan, RunId, RunStatus, Scope};
use crate::store::{NewRun, Store};

/// A default plan and a tenant's own are read back as set; an all-unset plan removes the row.
pub async fn plans_round_trip_and_an_empty_one_is_removed(store: Arc<dyn Store>) {
    assert!(store.plans().await.expect("plans").is_empty());
    let default = Plan {
        starts_per_minute: Some(600),
        ..Plan::default()
    };
    let acme = Plan {
        max_concurrent_runs: Some(5),
        weight: Some(3),
        ..Plan::default()
    };
    store.put_plan(None, &default, 1).await.expect("put");
    store
        .put_plan(Some(&ns("acme")), &acme, 1)
        .await
        .expect("put");
    let mut plans = store.plans().await.expect("plans");
    plans.sort_by_key(|(t, _)| t.as_ref().map(|t| t.to_string()));
    assert_eq!(
        plans,
        vec![(None, default.clone()), (Some(ns("acme")), acme)]
    );
    let changed = Plan {
        max_concurrent_runs: Some(7),
        ..Plan::default()
    };
    store
        .put_plan(Some(&ns("acme")), &changed, 2)
        .await
        .expect("put");
    store
        .put_plan(Some(&ns("acme")), &Plan::default(), 3)
        .await
        .expect("put");
    assert_eq!(store.plans().await.expect("plans"), vec![(None, default)]);
}

/// Usage counts a tenant's top-level runs: started and not ended, accepted and not started,
/// created in the last minute; children and other tenants do not count.
pub async fn usage_counts_a_tenants_top_level_runs(store: Arc<dyn Store>) {
    for i in 0..3 {
        store
            .create_run(new_run(&format!("u{i}"), "acme"), 100_000, None)
            .await
            .expect("create");
    }
    store
        .create_run(new_run("other", "globex"), 100_000, None)
        .await
        .expect("create");
    let claimed = store
        .claim_these(
            &Scope::All,
            &[RunId::parse("u0").expect("id")],
            "a",
            100_001,
            1_000,
            5,
        )
        .await
        .expect("claim");
    assert_eq!(claimed.len(), 1);
    let mut child = new_run("u0.child.1", "acme");
    child.parent_run_id = Some(RunId::parse("u0").expect("id"));
    child.nesting_depth = 1;
    store
        .create_run(child, 100_002, None)
        .await
        .expect("create");
    let usage = store.usage(&ns("acme"), 100_010).await.expect("usage");
    assert_eq!((usage.running, usage.queued), (1, 2));
    assert_eq!(
        usage.started_last_minute, 4,
        "the child was created in the last minute too"
    );
    assert_eq!(
        store
            .usage(&ns("acme"), 200_000)
            .await
            .expect("usage")
            .started_last_minute,
        0
    );
}

/// What waits is read with each tenant's firsts first, round robin over its workflows, at most
/// `per_tenant` of each tenant; a never-started top-level run is marked fresh.
pub async fn runnable_runs_are_read_round_robin_between_tenants_and_workflows(
    store: Arc<dyn Store>,
) {
    // acme: 30 older runs over workflows a and b; globex: one newer run.
    for i in 0..30 {
        let workflow = if i % 2 == 0 { "a" } else { "b" };
        let run = NewRun::top_level(
            RunId::parse(&format!("acme-{i}")).expect("id"),
            ns("acme"),
            workflow,
            1,
            json!(null),
        );
        store
            .create_run(run, 1_000 + i, None)
            .await
            .expect("create");
    }
    store
        .create_run(new_run("globex-0", "globex"), 5_000, None)
        .await
        .expect("create");
    let runs = store
        .runnable_runs(&Scope::All, 10_000, 4, 100, 5)
        .await
        .expect("read");
    let acme: Vec<&str> = runs
        .iter()
        .filter(|r| r.namespace == ns("acme"))
        .map(|r| r.workflow.as_str())
        .collect();
    assert_eq!(
        acme,
        ["a", "b", "a", "b"],
        "round robin over acme's workflows, 4 at most"
    );
    let globex = runs
        .iter()
        .position(|r| r.namespace == ns("globex"))
        .expect("globex read");
    assert!(
        globex < 2,
        "globex's first comes among the tenants' firsts: {runs:?}"
    );
    assert!(runs.iter().all(|r| r.fresh));
    let scoped = store
        .runnable_runs(&Scope::Only(ns("globex")), 10_000, 4, 100, 5)
        .await
        .expect("read");
    assert_eq!(scoped.len(), 1);
    assert_eq!(scoped[0].id.as_str(), "globex-0");
}

/// Runs due in the same millisecond are read by id, whatever order the store keeps them in:
/// the claim loop breaks ties between tenants by the order of the read.
pub async fn runnable_runs_due_together_are_read_by_id(store: Arc<dyn Store>) {
    for (id, tenant) in [
        ("z-acme", "acme"),
        ("m-acme", "acme"),
        ("a-globex", "globex"),
    ] {
        store
            .create_run(new_run(id, tenant), 1_000, None)
            .await
            .expect("create");
    }
    for _ in 0..3 {
        let runs = store
            .runnable_runs(&Scope::All, 10_000, 4, 100, 5)
            .await
            .expect("read");
        let ids: Vec<&str> = runs.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, ["a-globex", "m-acme", "z-acme"]);
    }
}

/// Sets `tenant`'s stored concurrency ceiling.
async fn ceiling(store: &Arc<dyn Store>, tenant: &str, n: u32) {
    let plan = Plan {
        max_concurrent_runs: Some(n),
        ..Plan::default()
    };
    store
        .put_plan(Some(&ns(tenant)), &plan, 0)
        .await
        .expect("put plan");
}

/// A claim of fresh runs under a concurrency ceiling starts only as many as the tenant has
/// room for, counting its runs already started; other tenants and started runs are not held.
pub async fn claims_under_a_ceiling_start_no_more_than_it_allows(store: Arc<dyn Store>) {
    let mut ids = Vec::new();
    for i in 0..5 {
        let id = format!("c{i}");
        store
            .create_run(new_run(&id, "acme"), 1_000 + i, None)
            .await
            .expect("create");
        ids.push(RunId::parse(&id).expect("id"));
    }
    store
        .create_run(new_run("g0", "globex"), 1_000, None)
        .await
        .expect("create");
    ids.push(RunId::parse("g0").expect("id"));
    // The ceiling is the one on record, read in the claim: acme's own 2; globex follows the
    // default, which has none.
    ceiling(&store, "acme", 2).await;
    let first = store
        .claim_these(&Scope::All, &ids, "a", 2_000, 1_000, 5)
        .await
        .expect("claim");
    let mut claimed: Vec<&str> = first.iter().map(|r| r.id.as_str()).collect();
    claimed.sort();
    assert_eq!(
        claimed,
        ["c0", "c1", "g0"],
        "two of acme's (the earliest), and globex's"
    );
    // Full: nothing more of acme's starts, whoever asks.
    let again = store
        .claim_these(&Scope::All, &ids, "b", 2_001, 1_000, 5)
        .await
        .expect("claim");
    assert!(again.is_empty(), "{again:?}");
    // One ends: one more starts.
    store
        .update_run_if(
            &Scope::All,
            &ids[0],
            &[RunStatus::Running],
            crate::store::RunPatch {
                status: RunStatus::Cancelled,
                error: None,
            },
            2_002,
        )
        .await
        .expect("cancel")
        .expect("it was running");
    let next = store
        .claim_these(&Scope::All, &ids, "b", 2_003, 1_000, 5)
        .await
        .expect("claim");
    assert_eq!(next.len(), 1);
    assert_eq!(next[0].id.as_str(), "c2");
    // A started run whose lease lapsed is taken over whatever the ceiling: it holds its slot.
    ceiling(&store, "acme", 0).await;
    let recovered = store
        .claim_these(&Scope::All, &ids, "c", 5_000, 1_000, 5)
        .await
        .expect("claim");
    let mut recovered: Vec<&str> = recovered.iter().map(|r| r.id.as_str()).collect();
    recovered.sort();
    assert_eq!(recovered, ["c1", "c2", "g0"]);
    // A tenant without a plan of its own is held to the default's ceiling.
    let default = Plan {
        max_concurrent_runs: Some(1),
        ..Plan::default()
    };
    store.put_plan(None, &default, 0).await.expect("put plan");
    let mut fresh = Vec::new();
    for id in ["i0", "i1"] {
        store
            .create_run(new_run(id, "initech"), 6_000, None)
            .await
            .expect("create");
        fresh.push(RunId::parse(id).expect("id"));
    }
    let one = store
        .claim_these(&Scope::All, &fresh, "d", 6_001, 1_000, 5)
        .await
        .expect("claim");
    assert_eq!(one.len(), 1, "{one:?}");
}
