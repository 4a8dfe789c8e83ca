//! API tokens: issued, looked up by id at every request, listed and revoked.

use async_trait::async_trait;

use super::StoreResult;
use crate::model::{ApiToken, Millis, Namespace};

/// A token to store: its public parts and the hash of its secret (never the secret).
#[derive(Clone, Debug)]
pub struct NewToken {
    /// The token as listed (its `revoked_at` is `None`).
    pub token: ApiToken,
    /// SHA-256 of the secret, hex.
    pub secret_hash: String,
}

/// API tokens, kept in the same database as the runs so that a revocation reaches every
/// process at its next request.
#[async_trait]
pub trait ApiTokens: Send + Sync + 'static {
    /// Stores a newly issued token.
    async fn create_token(&self, token: NewToken) -> StoreResult<()>;
    /// The token with public id `id` and its secret's hash, revoked or not.
    async fn token(&self, id: &str) -> StoreResult<Option<(ApiToken, String)>>;
    /// The tokens of `tenant` (`None`: the operator tokens), newest first, revoked ones too.
    async fn tokens(&self, tenant: Option<&Namespace>) -> StoreResult<Vec<ApiToken>>;
    /// Revokes token `id` at `now`, if it is one of `only`'s (`None`: any token, for an
    /// operator); whether a live token was revoked. Another tenant's token is not found.
    async fn revoke_token(
        &self,
        id: &str,
        only: Option<&Namespace>,
        now: Millis,
    ) -> StoreResult<bool>;
}
