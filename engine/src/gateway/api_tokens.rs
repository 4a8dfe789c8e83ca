//! API tokens as a bearer sends them: `dtk_<id>_<secret>`. The id finds the stored token (so
//! a revocation or an expiry holds at the next request on every process); the secret is 256
//! random bits, kept only as its SHA-256, so a leaked table grants nothing. Unlike the wire's
//! HMAC tenant tokens ([`super::TokenSigner`]), each is issued, named, scoped and revoked on its
//! own.

use sha2::{Digest, Sha256};

use crate::model::{ApiToken, Millis, Namespace, TokenScope};
use crate::store::{ApiTokens, NewToken, StoreError};

/// What every API token starts with.
pub const API_TOKEN_PREFIX: &str = "dtk_";

/// Why a bearer token was refused. The messages never echo the secret.
#[derive(Debug, thiserror::Error)]
pub enum ApiTokenError {
    /// Not of the `dtk_<id>_<secret>` shape.
    #[error("invalid API token: expected `dtk_<id>_<secret>` as `durable token issue` prints it")]
    Malformed,
    /// No such token, or its secret does not match.
    #[error("invalid or unknown API token")]
    Unknown,
    /// Revoked by an operator or a tenant admin.
    #[error("this API token was revoked; issue a new one (durable token issue)")]
    Revoked,
    /// Past its expiry.
    #[error("this API token expired; issue a new one (durable token issue)")]
    Expired,
    /// The store could not be asked.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Issues a token for `tenant` (`None` with [`TokenScope::Operator`]): what to store, and the
/// string to hand over once.
pub fn issue(
    tenant: Option<Namespace>,
    name: &str,
    scope: TokenScope,
    expires_at: Option<Millis>,
    now: Millis,
) -> (NewToken, String) {
    let id = hex::encode(rand::random::<[u8; 8]>());
    let secret = hex::encode(rand::random::<[u8; 32]>());
    let token = ApiToken {
        id: id.clone(),
        tenant,
        name: name.to_owned(),
        scope,
        created_at: now,
        expires_at,
        revoked_at: None,
    };
    let stored = NewToken {
        token,
        secret_hash: digest(&secret),
    };
    (stored, format!("{API_TOKEN_PREFIX}{id}_{secret}"))
}

/// The stored token `bearer` names, if it is live at `now` and its secret matches.
pub async fn check(
    tokens: &dyn ApiTokens,
    bearer: &str,
    now: Millis,
) -> Result<ApiToken, ApiTokenError> {
    let (id, secret) = parts(bearer).ok_or(ApiTokenError::Malformed)?;
    let Some((token, stored_hash)) = tokens.token(id).await? else {
        return Err(ApiTokenError::Unknown);
    };
    if !same(&digest(secret), &stored_hash) {
        return Err(ApiTokenError::Unknown);
    }
    if token.revoked_at.is_some() {
        return Err(ApiTokenError::Revoked);
    }
    if !token.is_live(now) {
        return Err(ApiTokenError::Expired);
    }
    Ok(token)
}

/// Whether `bearer` is `configured`: a secret a process was given at start rather than a token
/// it can look up (a store-less worker's `/metrics` scrape secret). Compared as digests, in full, so the time
/// taken says nothing of how much of it matched.
pub fn is_configured(configured: &str, bearer: &str) -> bool {
    same(&digest(configured), &digest(bearer))
}

/// A token's id and secret, if it has their shape.
fn parts(token: &str) -> Option<(&str, &str)> {
    token
        .strip_prefix(API_TOKEN_PREFIX)
        .and_then(|rest| rest.split_once('_'))
        .filter(|(id, secret)| {
            id.len() == 16
                && secret.len() == 64
                && id
                    .bytes()
                    .chain(secret.bytes())
                    .all(|b| b.is_ascii_hexdigit())
        })
}

fn digest(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// Compares two digests without stopping at the first difference.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_issued_token_has_its_shape_and_stores_no_secret() {
        let (stored, token) = issue(None, "ops", TokenScope::Operator, None, 5);
        let rest = token.strip_prefix(API_TOKEN_PREFIX).expect("prefix");
        let (id, secret) = rest.split_once('_').expect("shape");
        assert_eq!(id, stored.token.id);
        assert_eq!(secret.len(), 64);
        assert!(!stored.secret_hash.contains(secret));
        assert_eq!(stored.secret_hash, digest(secret));
        assert!(same("abc", "abc") && !same("abc", "abd") && !same("abc", "ab"));
    }
}
