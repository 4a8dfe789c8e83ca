//! Secrets and ids the server generates: the tenant-token secret, demo passwords, the clock.

use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use durable::gateway::TokenSigner;
use durable::store::Accounts;
use rand::Rng;
use rand::distributions::Alphanumeric;

const SECRET_KEY: &str = "tenant_token_secret";

/// Where the wire's signing secret may come from when `DURABLE_TENANT_SECRET` is not set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fallback {
    /// Nowhere: a deployment configures its secret, and a secret kept in plain text in the
    /// database is not one.
    None,
    /// One a `--demo` server generated and kept in the database (for `durable token issue
    /// --wire` beside it); none is written.
    Kept,
    /// Generated once and kept in the database (a `--demo` server, for trying durable out).
    Generate,
}

/// The signer of the wire's HMAC tenant tokens: `DURABLE_TENANT_SECRET` when set, else what
/// `fallback` allows.
pub async fn token_signer(
    accounts: &dyn Accounts,
    fallback: Fallback,
) -> anyhow::Result<TokenSigner> {
    let secret = match std::env::var("DURABLE_TENANT_SECRET") {
        Ok(s) if !s.is_empty() => Some(s),
        _ => match fallback {
            Fallback::None => None,
            Fallback::Kept => accounts
                .setting(SECRET_KEY)
                .await
                .context("reading the tenant token secret")?,
            Fallback::Generate => Some(
                accounts
                    .setting_or_insert(SECRET_KEY, random_string(48))
                    .await
                    .context("reading the tenant token secret")?,
            ),
        },
    };
    let Some(secret) = secret else {
        bail!(
            "DURABLE_TENANT_SECRET is not set: set it to a random value of at least 32 bytes (openssl rand -hex 32), the same on every control plane; it signs the wire's tenant tokens (durable serve --demo keeps a generated one in the database, for trying durable out)"
        );
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
