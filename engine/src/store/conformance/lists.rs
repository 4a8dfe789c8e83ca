//! The dashboard's lists: keyset pages, filters, facets, run families and per-namespace loads.

use std::sync::Arc;

use serde_json::json;

use super::support::{attempt_of, lease, move_run, new_run, ns, suspend_on_step};
use crate::model::{RunId, RunQuery, RunStatus, Scope};
use crate::store::{NewRun, Store};

/// Listing is newest first and pages with a keyset cursor without gaps or repeats.
pub async fn pages_follow_the_keyset_order(store: Arc<dyn Store>) {
    for i in 0..7 {
        store
            .create_run(new_run(&format!("p{i}"), "acme"), 1000 + (i / 2), None)
            .await
            .expect("create");
    }
    let mut seen = Vec::new();
    let mut query = RunQuery {
        limit: 3,
        ..RunQuery::default()
    };
    loop {
        let page = store
            .list_runs(&Scope::Only(ns("acme")), &query)
            .await
            .expect("list");
        seen.extend(page.runs.iter().map(|r| (r.created_at, r.id.to_string())));
        match page.next_cursor {
            Some(c) => query.cursor = Some(c),
            None => break,
        }
    }
    let mut expected = seen.clone();
    expected.sort_by(|a, b| b.cmp(a));
    expected.dedup();
    assert_eq!(seen.len(), 7, "every run appears once");
    assert_eq!(seen, expected, "pages are newest first by (created_at, id)");
}

/// Filters on status and workflow apply.
pub async fn list_filters_apply(store: Arc<dyn Store>) {
    store
        .create_run(new_run("f1", "acme"), 1, None)
        .await
        .expect("create");
    let mut other = new_run("f2", "acme");
    other.workflow = "other".into();
    store.create_run(other, 2, None).await.expect("create");
    let q = RunQuery {
        workflow: Some("other".into()),
        ..RunQuery::default()
    };
    let page = store.list_runs(&Scope::All, &q).await.expect("list");
    assert_eq!(page.runs.len(), 1);
    assert_eq!(page.runs[0].workflow, "other");
    let q = RunQuery {
        status: Some(RunStatus::Completed),
        ..RunQuery::default()
    };
    assert!(
        store
            .list_runs(&Scope::All, &q)
            .await
            .expect("list")
            .runs
            .is_empty()
    );
}

/// Tags, search attributes and time ranges filter lists; facets count by status, workflow, tag
/// and attribute value, each inside the reader's scope only.
pub async fn filters_and_facets_stay_inside_the_scope(store: Arc<dyn Store>) {
    let plant = |id: &'static str,
                 namespace: &'static str,
                 workflow: &'static str,
                 tags: &[&str],
                 region: Option<serde_json::Value>,
                 at: i64| {
        let store = store.clone();
        let mut run = NewRun::top_level(
            RunId::parse(id).expect("id"),
            ns(namespace),
            workflow,
            1,
            json!(null),
        );
        run.tags = tags.iter().map(|t| (*t).to_owned()).collect();
        if let Some(region) = region {
            run.search_attributes.insert("region".into(), region);
            run.search_attributes.insert("tier.level".into(), json!(2));
        }
        async move { store.create_run(run, at, None).await.expect("create") }
    };
    plant(
        "f-a1",
        "acme",
        "order",
        &["vip", "eu"],
        Some(json!("eu-west")),
        10,
    )
    .await;
    plant(
        "f-a2",
        "acme",
        "order",
        &["vip"],
        Some(json!("us-east")),
        20,
    )
    .await;
    plant(
        "f-a3",
        "acme",
        "refund",
        &["eu"],
        Some(json!("eu-west")),
        30,
    )
    .await;
    plant("f-a4", "acme", "refund", &[], None, 40).await;
    plant(
        "f-g1",
        "globex",
        "order",
        &["vip", "secret"],
        Some(json!("eu-west")),
        50,
    )
    .await;
    let acme = Scope::Only(ns("acme"));
    let ids = |page: crate::model::RunPage| {
        page.runs
            .into_iter()
            .map(|r| r.id.to_string())
            .collect::<Vec<_>>()
    };
    let by_tag = RunQuery {
        tag: Some("vip".into()),
        ..RunQuery::default()
    };
    assert_eq!(
        ids(store.list_runs(&acme, &by_tag).await.expect("list")),
        ["f-a2", "f-a1"]
    );
    assert_eq!(
        ids(store.list_runs(&Scope::All, &by_tag).await.expect("list")),
        ["f-g1", "f-a2", "f-a1"],
        "the operator sees every namespace"
    );
    let by_attribute = RunQuery {
        attribute: Some(
            crate::model::AttributeFilter::new("region", json!("eu-west")).expect("filter"),
        ),
        ..RunQuery::default()
    };
    assert_eq!(
        ids(store.list_runs(&acme, &by_attribute).await.expect("list")),
        ["f-a3", "f-a1"]
    );
    let dotted = RunQuery {
        attribute: Some(
            crate::model::AttributeFilter::new("tier.level", json!(2)).expect("filter"),
        ),
        workflow: Some("order".into()),
        tag: Some("eu".into()),
        ..RunQuery::default()
    };
    assert_eq!(
        ids(store.list_runs(&acme, &dotted).await.expect("list")),
        ["f-a1"]
    );
    let window = RunQuery {
        created_from: Some(20),
        created_until: Some(40),
        ..RunQuery::default()
    };
    assert_eq!(
        ids(store.list_runs(&acme, &window).await.expect("list")),
        ["f-a3", "f-a2"]
    );

    let facets = store.facets(&acme).await.expect("facets");
    assert_eq!(facets.statuses.len(), 1);
    assert_eq!(facets.statuses[0].count, 4);
    let counts = |v: &[crate::model::ValueCount]| {
        v.iter()
            .map(|c| (c.value.clone(), c.count))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        counts(&facets.workflows),
        [(json!("order"), 2), (json!("refund"), 2)]
    );
    assert_eq!(
        counts(&facets.tags),
        [(json!("eu"), 2), (json!("vip"), 2)],
        "globex's `secret` tag is not counted for acme"
    );
    let all = store.facets(&Scope::All).await.expect("facets");
    assert_eq!(counts(&all.tags)[0], (json!("vip"), 3));
    let regions = store.value_facets(&acme, "region").await.expect("values");
    assert_eq!(
        counts(&regions),
        [(json!("eu-west"), 2), (json!("us-east"), 1)]
    );
    let levels = store
        .value_facets(&acme, "tier.level")
        .await
        .expect("values");
    assert_eq!(counts(&levels), [(json!(2), 3)]);
    assert!(
        store
            .value_facets(&Scope::Only(ns("initech")), "region")
            .await
            .expect("values")
            .is_empty()
    );
}

/// The family filter finds a run and everything started under it, inside the scope; the
/// operator's per-namespace load counts live runs and recent failures only.
pub async fn families_and_loads_follow_the_scope(store: Arc<dyn Store>) {
    let root = store
        .create_run(new_run("fam-root", "acme"), 10, None)
        .await
        .expect("root");
    let mut child = new_run("fam-root.child.0", "acme");
    child.parent_run_id = Some(root.id.clone());
    child.root_run_id = root.id.clone();
    store.create_run(child, 20, None).await.expect("child");
    store
        .create_run(new_run("fam-other", "acme"), 30, None)
        .await
        .expect("other");
    let acme = Scope::Only(ns("acme"));
    let family = |id: &str| RunQuery {
        family: Some(RunId::parse(id).expect("id")),
        ..RunQuery::default()
    };
    let ids = |page: crate::model::RunPage| {
        page.runs
            .into_iter()
            .map(|r| r.id.to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        ids(store
            .list_runs(&acme, &family("fam-root"))
            .await
            .expect("list")),
        ["fam-root.child.0", "fam-root"]
    );
    assert_eq!(
        ids(store
            .list_runs(&acme, &family("fam-root.child.0"))
            .await
            .expect("list")),
        ["fam-root.child.0"],
        "a child's family filter is the child itself"
    );
    assert!(
        store
            .list_runs(&Scope::Only(ns("globex")), &family("fam-root"))
            .await
            .expect("list")
            .runs
            .is_empty(),
        "another tenant's family is invisible"
    );

    // Loads: acme has 3 pending; one globex run failed recently, one long ago, one is blocked.
    for (id, status, at) in [
        ("load-g1", RunStatus::Failed, 5_000),
        ("load-g2", RunStatus::Failed, 100),
        ("load-g3", RunStatus::Blocked, 100),
    ] {
        store
            .create_run(new_run(id, "globex"), 50, None)
            .await
            .expect("globex run");
        move_run(&store, id, &[RunStatus::Pending], status, at).await;
    }
    let loads = store
        .namespace_loads(&Scope::All, 1_000)
        .await
        .expect("loads");
    let summary = loads
        .iter()
        .map(|l| {
            (
                l.namespace.to_string(),
                l.pending,
                l.blocked,
                l.failed_recently,
                l.backlog(),
            )
        })
        .collect::<Vec<_>>();
    assert_eq!(
        summary,
        [
            ("acme".to_owned(), 3, 0, 0, 3),
            ("globex".to_owned(), 0, 1, 1, 1)
        ]
    );
    let only_acme = store.namespace_loads(&acme, 1_000).await.expect("loads");
    assert_eq!(
        only_acme.len(),
        1,
        "a tenant's view holds only its own load"
    );
    assert_eq!(only_acme[0].namespace, ns("acme"));
}

/// The counts the store keeps (by tenant, workflow and status, and by tenant and tag) equal a
/// count of the runs themselves after starts, claims, turns, status changes and retries, in
/// every scope, before and after the deltas are folded.
pub async fn counts_follow_every_change_of_a_run(store: Arc<dyn Store>) {
    use std::collections::BTreeMap;

    async fn tally(
        store: &Arc<dyn Store>,
        scope: &Scope,
    ) -> BTreeMap<(String, String, String), u64> {
        let mut counts = BTreeMap::new();
        let mut query = RunQuery {
            limit: 100,
            ..RunQuery::default()
        };
        loop {
            let page = store.list_runs(scope, &query).await.expect("list");
            for run in &page.runs {
                *counts
                    .entry((
                        run.namespace.to_string(),
                        run.workflow.clone(),
                        run.status.as_str().to_owned(),
                    ))
                    .or_default() += 1;
            }
            match page.next_cursor {
                Some(c) => query.cursor = Some(c),
                None => return counts,
            }
        }
    }
    async fn check(store: &Arc<dyn Store>, moment: &str) {
        for scope in [
            Scope::All,
            Scope::Only(ns("acme")),
            Scope::Only(ns("globex")),
        ] {
            for fold in [false, true] {
                if fold {
                    store.fold_counts().await.expect("fold");
                }
                let kept = store
                    .run_counts(&scope)
                    .await
                    .expect("counts")
                    .into_iter()
                    .map(|c| {
                        (
                            (
                                c.namespace.to_string(),
                                c.workflow,
                                c.status.as_str().to_owned(),
                            ),
                            c.count,
                        )
                    })
                    .collect::<BTreeMap<_, _>>();
                let counted = tally(store, &scope).await;
                assert_eq!(kept, counted, "{moment}, {scope:?}, folded: {fold}");
                let mut by_status = BTreeMap::<String, u64>::new();
                for ((_, _, status), n) in &counted {
                    *by_status.entry(status.clone()).or_default() += n;
                }
                let statuses = store
                    .count_by_status(&scope)
                    .await
                    .expect("by status")
                    .into_iter()
                    .map(|c| (c.status.as_str().to_owned(), c.count))
                    .collect::<BTreeMap<_, _>>();
                assert_eq!(statuses, by_status, "{moment}, {scope:?}, folded: {fold}");
            }
        }
    }

    let tagged = |id: &str, namespace: &str, workflow: &str, tags: &[&str]| {
        let mut run = new_run(id, namespace);
        run.workflow = workflow.into();
        run.tags = tags.iter().map(|t| (*t).to_owned()).collect();
        run
    };
    for (id, namespace, workflow, tags) in [
        ("c1", "acme", "a", &["x", "y"][..]),
        ("c2", "acme", "a", &["x", "x"]),
        ("c3", "acme", "b", &[]),
        ("c4", "globex", "a", &["x"]),
        ("c5", "globex", "a", &["z"]),
    ] {
        store
            .create_run(tagged(id, namespace, workflow, tags), 10, None)
            .await
            .expect("create");
    }
    // A start that claims its run is inserted running.
    store
        .create_run(tagged("c6", "acme", "b", &["y"]), 10, Some(&lease("a")))
        .await
        .expect("start");
    check(&store, "after the starts").await;
    let tags = store
        .facets(&Scope::Only(ns("acme")))
        .await
        .expect("facets")
        .tags
        .into_iter()
        .map(|c| (c.value.as_str().unwrap_or_default().to_owned(), c.count))
        .collect::<Vec<_>>();
    assert_eq!(
        tags,
        [("x".to_owned(), 2), ("y".to_owned(), 2)],
        "a run counts once per tag, and only the tenant's runs count"
    );

    let id = |s: &str| RunId::parse(s).expect("id");
    for (run, from, to) in [
        ("c1", RunStatus::Pending, RunStatus::Failed),
        ("c2", RunStatus::Pending, RunStatus::Cancelled),
        ("c4", RunStatus::Pending, RunStatus::Completed),
    ] {
        move_run(&store, run, &[from], to, 20).await;
    }
    check(&store, "after status changes").await;

    store
        .retry_run(&Scope::All, &id("c1"), 30)
        .await
        .expect("retry")
        .expect("retried");
    let attempt = attempt_of(&store, &id("c6")).await;
    store
        .commit_turn(&lease("a"), &id("c6"), attempt, suspend_on_step(1), 40)
        .await
        .expect("commit")
        .expect("committed");
    check(&store, "after a retry and a turn").await;

    // Totals only grow: c1 failed once (then was retried), c2 was cancelled, c4 completed.
    for fold in [false, true] {
        if fold {
            store.fold_counts().await.expect("fold");
        }
        let totals = store
            .run_totals(&Scope::All)
            .await
            .expect("totals")
            .into_iter()
            .map(|t| {
                let finished = t
                    .finished
                    .iter()
                    .map(|c| (c.status.as_str(), c.count))
                    .collect::<Vec<_>>();
                (t.namespace.to_string(), t.workflow, t.started, finished)
            })
            .collect::<Vec<_>>();
        assert_eq!(
            totals,
            [
                (
                    "acme".to_owned(),
                    "a".to_owned(),
                    2,
                    vec![("failed", 1), ("cancelled", 1)]
                ),
                ("acme".to_owned(), "b".to_owned(), 2, vec![]),
                (
                    "globex".to_owned(),
                    "a".to_owned(),
                    2,
                    vec![("completed", 1)]
                ),
            ],
            "folded: {fold}"
        );
        let globex = store
            .run_totals(&Scope::Only(ns("globex")))
            .await
            .expect("totals");
        assert_eq!(globex.len(), 1, "a tenant's totals are its own");
    }
}
