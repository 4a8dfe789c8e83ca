//! The store conformance suite on a real PostgreSQL, each test in a database of its own, plus the
//! legacy-row rule.
//!
//! The server is `DURABLE_TEST_POSTGRES` (default `postgres://postgres@127.0.0.1:5432/postgres`).
//! `make test` checks it first: when it is unreachable outside CI it says so loudly and sets
//! `DURABLE_SKIP_POSTGRES=1`, which skips these tests; in CI they fail instead.

use std::sync::Arc;

use durable::model::{Namespace, RunId, RunQuery, Scope};
use durable::store::{PgStore, Store, postgres_testing};

/// A fresh, migrated database; `None` when the suite is skipped.
async fn fresh_pg() -> Option<PgStore> {
    let url = postgres_testing::fresh_database().await?;
    Some(PgStore::connect(&url).await.expect("connect and migrate"))
}

async fn fresh() -> Option<Arc<dyn Store>> {
    fresh_pg()
        .await
        .map(|store| Arc::new(store) as Arc<dyn Store>)
}

durable::store_conformance!(skippable fresh());

#[tokio::test]
async fn legacy_null_and_empty_namespaces_read_as_default() {
    let Some(store) = fresh_pg().await else {
        return;
    };
    for (id, ns) in [("l-null", "NULL"), ("l-empty", "''")] {
        store
            .execute_raw(&format!(
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
    assert!(page.runs.iter().all(|r| r.namespace.is_default()));
    assert!(
        store
            .get_run(&default, &RunId::parse("l-null").expect("id"))
            .await
            .expect("get")
            .is_some()
    );
    let acme = Scope::Only(Namespace::tenant("acme").expect("ns"));
    assert!(
        store
            .list_runs(&acme, &RunQuery::default())
            .await
            .expect("list")
            .runs
            .is_empty()
    );
}
