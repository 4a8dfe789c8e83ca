//! Secrets and ids the server generates: the tenant-token secret, demo passwords, the clock.

use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Context;
use durable::gateway::TokenSigner;
use durable::store::Accounts;
use rand::Rng;
use rand::distributions::Alphanumeric;

const SECRET_KEY: &str = "tenant_token_secret";

/// The signer for API tokens: `DURABLE_TENANT_SECRET` when set, else a random secret generated
/// once and kept in the database, so tokens survive restarts.
pub async fn token_signer(accounts: &dyn Accounts) -> anyhow::Result<TokenSigner> {
    let secret = match std::env::var("DURABLE_TENANT_SECRET") {
        Ok(s) if !s.is_empty() => s,
        _ => accounts
            .setting_or_insert(SECRET_KEY, random_string(48))
            .await
            .context("reading the tenant token secret")?,
    };
    Ok(TokenSigner::new(secret.into_bytes())?)
}

/// A random password for a new user.
pub fn generate_password() -> String {
    random_string(20)
}

fn random_string(len: usize) -> String {
    rand::thread_rng()
        .sample_iter(&Alphanumeric)
        .take(len)
        .map(char::from)
        .collect()
}

/// Milliseconds since the epoch.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or_default()
}
