//! A fresh PostgreSQL database per test, for every crate's PostgreSQL suites.

use std::time::{SystemTime, UNIX_EPOCH};

use sqlx::Connection;

/// Creates an empty database on the test server and returns its URL; `None` when PostgreSQL
/// suites are skipped on this machine (`DURABLE_SKIP_POSTGRES`, set by `make test` after it
/// said so loudly). The server is `DURABLE_TEST_POSTGRES` (default
/// `postgres://postgres@127.0.0.1:5432/postgres`); an unreachable server fails the test.
pub async fn fresh_database() -> Option<String> {
    if std::env::var_os("DURABLE_SKIP_POSTGRES").is_some() {
        return None;
    }
    let admin_url = std::env::var("DURABLE_TEST_POSTGRES")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let mut admin = match sqlx::PgConnection::connect(&admin_url).await {
        Ok(conn) => conn,
        Err(e) => panic!(
            "PostgreSQL at {admin_url} is unreachable ({e}); start it, point DURABLE_TEST_POSTGRES \
             at one, or set DURABLE_SKIP_POSTGRES=1 to skip these tests"
        ),
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or_default();
    // Databases of earlier runs that were never dropped (a killed test) are cleared after ten
    // minutes; no test runs that long.
    let existing: Vec<String> =
        sqlx::query_scalar("SELECT datname FROM pg_database WHERE datname LIKE 'durable_t_%'")
            .fetch_all(&mut admin)
            .await
            .unwrap_or_default();
    for name in existing {
        let born = name
            .split('_')
            .nth(2)
            .and_then(|ms| ms.parse::<u128>().ok())
            .unwrap_or(0);
        if now.saturating_sub(born) > 600_000 {
            let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"))
                .execute(&mut admin)
                .await;
        }
    }
    let name = format!(
        "durable_t_{now}_{}",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    );
    if let Err(e) = sqlx::query(&format!("CREATE DATABASE \"{name}\""))
        .execute(&mut admin)
        .await
    {
        panic!("creating test database {name} failed: {e}");
    }
    match admin_url.rsplit_once('/') {
        Some((server, _)) => Some(format!("{server}/{name}")),
        None => panic!("DURABLE_TEST_POSTGRES must end in /DATABASE"),
    }
}
