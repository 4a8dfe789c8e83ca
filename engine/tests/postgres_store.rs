//! The store conformance suite on a real PostgreSQL, each test in a database of its own, plus the
//! legacy-row rule.
//!
//! The server is `DURABLE_TEST_POSTGRES` (default `postgres://postgres@127.0.0.1:5432/postgres`).
//! `make test` checks it first: when it is unreachable outside CI it says so loudly and sets
//! `DURABLE_SKIP_POSTGRES=1`, which skips these tests; in CI they fail instead.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{elsewhere, wait_for};

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_login_attempts_reserve_no_more_than_allowed() {
    let Some(store) = fresh_pg().await else {
        return;
    };
    durable::store::conformance::parallel_login_attempts_reserve_no_more_than_allowed(Arc::new(
        store,
    ))
    .await;
}

#[tokio::test]
async fn api_tokens_are_found_listed_and_revoked() {
    let Some(store) = fresh_pg().await else {
        return;
    };
    durable::store::conformance::api_tokens_are_found_listed_and_revoked(Arc::new(store)).await;
}

#[tokio::test]
async fn accounts_track_sessions_and_failed_logins() {
    let Some(store) = fresh_pg().await else {
        return;
    };
    durable::store::conformance::accounts_track_sessions_and_failed_logins(Arc::new(store)).await;
}

/// A result whose step is not on record yet (another control plane sent the step before the
/// commit that records it, and that commit holds the run's row lock) writes nothing while it
/// waits: a write would queue behind the lock, and with the writes of other runs around it in a
/// batch, could deadlock with the commit's own batch. Once the commit lands, the result is
/// applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_ahead_of_its_steps_commit_waits_without_taking_the_runs_lock() {
    use durable::model::RunStatus;
    use durable::prelude::*;
    use durable::transport::MemoryTransport;
    use serde_json::json;
    use sqlx::{Connection, Executor};

    let Some(url) = postgres_testing::fresh_database().await else {
        return;
    };
    let store: Arc<dyn Store> = Arc::new(PgStore::connect(&url).await.expect("connect"));
    let engine = Engine::new(
        store.clone(),
        Arc::new(MemoryTransport::new()),
        Arc::new(elsewhere::two_steps()),
        EngineConfig::default(),
    );
    engine.start().await.expect("engine starts");

    let id = elsewhere::creates(&store, "acme", "two", 1).await;
    let claim = elsewhere::claim();
    let suspended = store
        .commit_turn(
            &claim,
            &id,
            durable::store::conformance::attempt_of(&store, &id).await,
            elsewhere::sends_step(0, 1),
            2,
        )
        .await
        .expect("commit")
        .expect("still leased")
        .run;

    // The other control plane's commit is in flight: it holds the run's row.
    let mut commit_in_flight = sqlx::PgConnection::connect(&url).await.expect("connect");
    commit_in_flight.execute("BEGIN").await.expect("begin");
    commit_in_flight
        .execute(sqlx::query("SELECT id FROM runs WHERE id = $1 FOR UPDATE").bind(id.as_str()))
        .await
        .expect("lock the run");
    engine
        .transport()
        .publish_result(elsewhere::completed(&id, 1, 50), None)
        .await
        .expect("publish");
    // Long enough for the result's first tries (1, 4, 16 and 64 ms apart).
    tokio::time::sleep(Duration::from_millis(150)).await;
    let mut watcher = sqlx::PgConnection::connect(&url).await.expect("connect");
    let waiting: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() \
         AND wait_event_type = 'Lock'",
    )
    .fetch_one(&mut watcher)
    .await
    .expect("count lock waits");
    assert_eq!(waiting, 0, "nothing queued behind the run's lock");
    commit_in_flight.execute("ROLLBACK").await.expect("unlock");

    let step_0 = elsewhere::completed(&id, 0, 5);
    let to_step_1 = elsewhere::sends_step(1, 5);
    store
        .apply_result_and_commit(&step_0, &claim, suspended.attempt, to_step_1, 3)
        .await
        .expect("commit")
        .expect("the run was untouched");
    let done = wait_for(&store, &id, RunStatus::Completed).await;
    assert_eq!(done.output, Some(json!(50)), "the early result was applied");
    engine.shutdown().await;
}
