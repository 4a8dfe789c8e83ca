//! Tenant tokens: `<tenant>.<base64url(HMAC-SHA256(secret, tenant))>` (aviary wire §5), checked in
//! constant time. The tenant a request acts for is the one embedded in a token that verifies.
//! Operators and the HTTP API use stored API tokens instead (`super::api_tokens`).

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::model::{Namespace, NamespaceError};

type HmacSha256 = Hmac<Sha256>;

/// Why a token was refused. The messages never echo the secret or the expected signature.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// Empty, no separator, or nothing on one side of it.
    #[error("invalid or unauthorized tenant token: expected `<tenant>.<signature>`")]
    Malformed,
    /// The signature does not match.
    #[error("invalid or unauthorized tenant token")]
    BadSignature,
    /// The embedded tenant is not a valid tenant name.
    #[error("invalid or unauthorized tenant token: {0}")]
    BadTenant(#[from] NamespaceError),
    /// The secret is too short to be safe.
    #[error(
        "the tenant secret must be at least 32 bytes; set DURABLE_TENANT_SECRET to a longer random value"
    )]
    WeakSecret,
}

/// A verified tenant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TenantToken {
    /// The tenant the token was issued for.
    pub tenant: Namespace,
}

/// The tenant `token` names, unverified: what a worker holding it checks against the tenant it
/// serves, before a control plane verifies the signature.
pub fn named_tenant(token: &str) -> Result<Namespace, TokenError> {
    let (tenant, sig) = token.rsplit_once('.').ok_or(TokenError::Malformed)?;
    if tenant.is_empty() || sig.is_empty() {
        return Err(TokenError::Malformed);
    }
    Ok(Namespace::tenant(tenant)?)
}

/// Signs and verifies tenant tokens with one secret.
#[derive(Clone)]
pub struct TokenSigner {
    secret: Vec<u8>,
}

impl std::fmt::Debug for TokenSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenSigner { secret: <redacted> }")
    }
}

impl TokenSigner {
    /// A signer over `secret` (at least 32 bytes).
    pub fn new(secret: impl Into<Vec<u8>>) -> Result<Self, TokenError> {
        let secret = secret.into();
        if secret.len() < 32 {
            return Err(TokenError::WeakSecret);
        }
        Ok(TokenSigner { secret })
    }

    fn mac(&self, tenant: &str) -> HmacSha256 {
        // HMAC accepts keys of any length; this cannot fail.
        let mut mac = HmacSha256::new_from_slice(&self.secret)
            .unwrap_or_else(|_| unreachable!("hmac takes any key length"));
        mac.update(tenant.as_bytes());
        mac
    }

    /// Issues the token of `tenant`.
    pub fn sign(&self, tenant: &Namespace) -> String {
        let sig = self.mac(tenant.as_str()).finalize().into_bytes();
        format!("{tenant}.{}", URL_SAFE_NO_PAD.encode(sig))
    }

    /// Verifies `token` and returns the tenant it carries.
    pub fn verify(&self, token: &str) -> Result<TenantToken, TokenError> {
        let (tenant, sig) = token.rsplit_once('.').ok_or(TokenError::Malformed)?;
        if tenant.is_empty() || sig.is_empty() {
            return Err(TokenError::Malformed);
        }
        let sig = URL_SAFE_NO_PAD
            .decode(sig)
            .map_err(|_| TokenError::BadSignature)?;
        // `verify_slice` compares in constant time and rejects a length mismatch.
        self.mac(tenant)
            .verify_slice(&sig)
            .map_err(|_| TokenError::BadSignature)?;
        Ok(TenantToken {
            tenant: Namespace::tenant(tenant)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signer() -> TokenSigner {
        TokenSigner::new(vec![7u8; 32]).unwrap()
    }

    #[test]
    fn a_signed_token_verifies_to_its_tenant() {
        let acme = Namespace::tenant("acme").unwrap();
        let token = signer().sign(&acme);
        assert!(token.starts_with("acme."));
        assert_eq!(signer().verify(&token).unwrap().tenant, acme);
    }

    #[test]
    fn forged_and_malformed_tokens_are_refused() {
        let s = signer();
        let acme = s.sign(&Namespace::tenant("acme").unwrap());
        let sig = acme.rsplit_once('.').unwrap().1;
        // Same signature, other tenant.
        assert_eq!(
            s.verify(&format!("globex.{sig}")),
            Err(TokenError::BadSignature)
        );
        // Signed with another secret.
        let other = TokenSigner::new(vec![8u8; 32])
            .unwrap()
            .sign(&Namespace::tenant("acme").unwrap());
        assert_eq!(s.verify(&other), Err(TokenError::BadSignature));
        for bad in ["", "acme", ".sig", "acme.", "acme.!!!"] {
            assert!(s.verify(bad).is_err(), "{bad:?}");
        }
        // Truncated signature.
        assert_eq!(
            s.verify(&acme[..acme.len() - 2]),
            Err(TokenError::BadSignature)
        );
    }

    #[test]
    fn short_secrets_are_refused() {
        assert_eq!(
            TokenSigner::new(b"short".to_vec()).unwrap_err(),
            TokenError::WeakSecret
        );
    }
}
