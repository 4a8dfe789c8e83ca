//! The store conformance suite on SQLite, plus the SQLite-only legacy-row rule.

use std::sync::Arc;

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
    let store = Arc::new(fresh_sqlite().await);
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_login_attempts_reserve_no_more_than_allowed() {
    durable::store::conformance::parallel_login_attempts_reserve_no_more_than_allowed(Arc::new(
        fresh_sqlite().await,
    ))
    .await;
}

#[tokio::test]
async fn api_tokens_are_found_listed_and_revoked() {
    durable::store::conformance::api_tokens_are_found_listed_and_revoked(Arc::new(
        fresh_sqlite().await,
    ))
    .await;
}

#[tokio::test]
async fn accounts_track_sessions_and_failed_logins() {
    durable::store::conformance::accounts_track_sessions_and_failed_logins(Arc::new(
        fresh_sqlite().await,
    ))
    .await;
}
