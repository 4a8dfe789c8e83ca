//! Dashboard sessions (tower-sessions), kept in the same database as the runs so every control
//! plane behind a load balancer knows every session.

use anyhow::Context;
use tower_sessions::SessionStore;
use tower_sessions::cookie::SameSite;
use tower_sessions::session_store::ExpiredDeletion;
use tower_sessions::{Expiry, SessionManagerLayer};
use tower_sessions_sqlx_store::sqlx::postgres::PgPoolOptions;
use tower_sessions_sqlx_store::sqlx::sqlite::SqlitePoolOptions;
use tower_sessions_sqlx_store::{PostgresStore as PostgresSessions, SqliteStore as SqliteSessions};

use crate::database::is_postgres;

/// Dashboard sessions, stored in the same database as the runs.
pub enum Sessions {
    /// In the SQLite file.
    Sqlite(SessionManagerLayer<SqliteSessions>),
    /// In PostgreSQL, so any control plane behind a load balancer knows every session.
    Postgres(SessionManagerLayer<PostgresSessions>),
}

/// Sessions in the configured database, expiring after 12 idle hours; expired ones are
/// deleted every hour. Over `https`, the cookie is `Secure` and named with the `__Host-`
/// prefix, which browsers only accept from a secure origin for the whole host.
pub async fn session_layer(database_url: &str, https: bool) -> anyhow::Result<Sessions> {
    if is_postgres(database_url) {
        let pool = PgPoolOptions::new()
            .max_connections(4)
            .connect(database_url)
            .await
            .context("opening the session store")?;
        let store = PostgresSessions::new(pool);
        store
            .migrate()
            .await
            .context("creating the session table")?;
        delete_expired(store.clone());
        return Ok(Sessions::Postgres(configure(store, https)));
    }
    let pool = SqlitePoolOptions::new()
        .max_connections(2)
        .connect(database_url)
        .await
        .context("opening the session store")?;
    let store = SqliteSessions::new(pool);
    store
        .migrate()
        .await
        .context("creating the session table")?;
    delete_expired(store.clone());
    Ok(Sessions::Sqlite(configure(store, https)))
}

/// Deletes expired sessions every hour, so the table holds live ones only.
fn delete_expired<S: ExpiredDeletion>(store: S) {
    tokio::spawn(async move {
        let mut every = tokio::time::interval(std::time::Duration::from_secs(3600));
        loop {
            every.tick().await;
            if let Err(e) = store.delete_expired().await {
                tracing::warn!(error = %e, "deleting expired sessions failed; trying again in an hour");
            }
        }
    });
}

fn configure<S: SessionStore>(store: S, https: bool) -> SessionManagerLayer<S> {
    SessionManagerLayer::new(store)
        .with_name(if https {
            "__Host-durable_session"
        } else {
            "durable_session"
        })
        .with_path("/")
        .with_http_only(true)
        .with_same_site(SameSite::Lax)
        // Saved on every request, so the 12 hours count from the last one, not from the login.
        .with_always_save(true)
        .with_secure(https)
        .with_expiry(Expiry::OnInactivity(
            tower_sessions::cookie::time::Duration::hours(12),
        ))
}
