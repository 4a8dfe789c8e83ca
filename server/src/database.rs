//! Choosing and opening the database from `DATABASE_URL`: SQLite for the embedded default,
//! PostgreSQL for several control planes. Runs, checkpoints and the dashboard's accounts live
//! there, and so do sessions (see [`crate::sessions`]).

use std::sync::Arc;

use anyhow::{Context, bail};
use durable::store::{Accounts, PgStore, SqliteStore, Store};
use durable::url::redact;

/// The configured database: runs and checkpoints, and the dashboard's accounts.
#[derive(Clone)]
pub struct Database {
    pub store: Arc<dyn Store>,
    pub accounts: Arc<dyn Accounts>,
}

/// Whether `url` names PostgreSQL.
pub fn is_postgres(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

/// Opens the configured database (`sqlite://PATH` or `postgres://…`) and applies migrations.
pub async fn open_store(url: &str) -> anyhow::Result<Database> {
    if is_postgres(url) {
        let store = Arc::new(PgStore::connect(url).await.with_context(|| {
            format!(
                "opening {} (check that the server is up and the database exists; \
                     create it with `createdb`)",
                redact(url)
            )
        })?);
        return Ok(Database {
            store: store.clone(),
            accounts: store,
        });
    }
    if !url.starts_with("sqlite:") {
        bail!(
            "DATABASE_URL `{}` is not supported; use sqlite://PATH (for example \
             sqlite://./data/durable.db) or postgres://USER@HOST/DATABASE",
            redact(url)
        );
    }
    let store = Arc::new(
        SqliteStore::connect(url)
            .await
            .with_context(|| format!("opening {url}"))?,
    );
    Ok(Database {
        store: store.clone(),
        accounts: store,
    })
}
