//! The store conformance suite on SQLite, plus the SQLite-only legacy-row rule.

use std::sync::Arc;

use durable::model::{Namespace, RunId, RunQuery, Scope};
use durable::store::{SqliteStore, Store};

async fn fresh() -> Arc<dyn Store> {
    Arc::new(fresh_sqlite().await)
}

async fn fresh_sqlite() -> SqliteStore {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.keep().join("t.db");
    SqliteStore::connect(&format!("sqlite://{}", path.display()))
        .await
        .expect("connect")
}

durable::store_conformance!(fresh());

#[tokio::test]
async fn legacy_null_and_empty_namespaces_read_as_default() {
    let store = fresh_sqlite().await;
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
    assert!(
        page.runs.iter().all(|r| r.namespace.is_default()),
        "and read back as default"
    );
    let run = store
        .get_run(&default, &RunId::parse("l-null").expect("id"))
        .await
        .expect("get");
    assert!(run.is_some());
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
