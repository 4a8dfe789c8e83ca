//! The store conformance suite on a real PostgreSQL, each test in a database of its own, plus the
//! legacy-row rule.
//!
//! The server is `DURABLE_TEST_POSTGRES` (default `postgres://postgres@127.0.0.1:5432/postgres`).
//! `make test` checks it first: when it is unreachable outside CI it says so loudly and sets
//! `DURABLE_SKIP_POSTGRES=1`, which skips these tests; in CI they fail instead.

use std::sync::Arc;

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
    let store = Arc::new(store);
    let planter = store.clone();
    durable::store::conformance::legacy_null_and_empty_namespaces_read_as_default(
        store,
        move |sql| {
            let planter = planter.clone();
            async move { planter.execute_raw(&sql).await }
        },
    )
    .await;
}

#[tokio::test]
async fn accounts_track_sessions_and_failed_logins() {
    let Some(store) = fresh_pg().await else {
        return;
    };
    durable::store::conformance::accounts_track_sessions_and_failed_logins(Arc::new(store)).await;
}
