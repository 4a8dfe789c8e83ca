//! Envelope encryption: AES-256-GCM under a tenant's data key for its connections' secrets, and
//! under the master key for the data key itself. The associated data binds each ciphertext to
//! what it belongs to (the tenant, and the connection), so a ciphertext copied into another
//! tenant's row, or another connection's, fails to open instead of lending its secrets.
//!
//! A sealed value is `1 || nonce (12 bytes) || ciphertext and tag`; the leading byte is the
//! format, so a later one can be told apart.

use aes_gcm::aead::{Aead, KeyInit, OsRng, Payload};
use aes_gcm::{AeadCore, Aes256Gcm, Key, Nonce};
use zeroize::Zeroizing;

use super::MasterKey;

const FORMAT: u8 = 1;
const NONCE_BYTES: usize = 12;

/// Why a secret could not be sealed or opened. The messages never hold a key or a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    /// The ciphertext does not open under this key with this binding: it was altered, copied
    /// from another tenant's or connection's row, or sealed under another key.
    #[error(
        "{0} does not decrypt: it was altered, copied from another row, or sealed under another key"
    )]
    Open(String),
    /// The data key was wrapped by a master key this process does not have.
    #[error(
        "the data key of tenant `{tenant}` was wrapped by master key {key_id}, which this process does not have: set it as DURABLE_MASTER_KEY_PREVIOUS, then run `durable connection rotate-key`"
    )]
    UnknownMasterKey {
        /// Whose data key.
        tenant: String,
        /// The id of the key that wrapped it.
        key_id: String,
    },
    /// The system's random source failed to make a one-time key.
    #[error("the system's random source failed; retry")]
    Random,
    /// A one-time public key that is not 32 bytes of X25519.
    #[error("the request's `publicKey` is not an X25519 public key (32 bytes, base64url)")]
    PublicKey,
    /// No master key is configured.
    #[error(
        "connections need a master key: set DURABLE_MASTER_KEY (64 hex characters, `openssl rand -hex 32`) or DURABLE_MASTER_KEY_FILE on every server"
    )]
    NoMasterKey,
}

/// A tenant's data key: seals the secrets of its connections.
#[derive(Clone)]
pub struct DataKey(Zeroizing<[u8; 32]>);

impl std::fmt::Debug for DataKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DataKey(<redacted>)")
    }
}

impl DataKey {
    /// A new random data key.
    pub fn generate() -> Self {
        let key = Aes256Gcm::generate_key(OsRng);
        let mut bytes = Zeroizing::new([0u8; 32]);
        bytes.copy_from_slice(key.as_slice());
        DataKey(bytes)
    }

    /// Wraps this key under `master` for `tenant`.
    pub fn wrap(&self, master: &MasterKey, tenant: &str) -> Vec<u8> {
        seal(master.bytes(), &data_key_binding(tenant), self.0.as_slice())
    }

    /// Unwraps `tenant`'s data key.
    pub fn unwrap(master: &MasterKey, tenant: &str, wrapped: &[u8]) -> Result<Self, SecretError> {
        let plain = open(master.bytes(), &data_key_binding(tenant), wrapped)
            .ok_or_else(|| SecretError::Open(format!("the data key of tenant `{tenant}`")))?;
        let bytes: [u8; 32] = plain
            .as_slice()
            .try_into()
            .map_err(|_| SecretError::Open(format!("the data key of tenant `{tenant}`")))?;
        Ok(DataKey(Zeroizing::new(bytes)))
    }

    /// Seals connection `connection`'s secrets (any bytes) for `tenant`.
    pub fn seal_connection(&self, tenant: &str, connection: &str, plain: &[u8]) -> Vec<u8> {
        seal(&self.0, &connection_binding(tenant, connection), plain)
    }

    /// Opens what [`DataKey::seal_connection`] sealed for this tenant and connection.
    pub fn open_connection(
        &self,
        tenant: &str,
        connection: &str,
        sealed: &[u8],
    ) -> Result<Zeroizing<Vec<u8>>, SecretError> {
        open(&self.0, &connection_binding(tenant, connection), sealed)
            .ok_or_else(|| SecretError::Open(format!("the secrets of connection `{connection}`")))
    }
}

fn data_key_binding(tenant: &str) -> Vec<u8> {
    format!("durable.data-key/1\0{tenant}").into_bytes()
}

fn connection_binding(tenant: &str, connection: &str) -> Vec<u8> {
    format!("durable.connection/1\0{tenant}\0{connection}").into_bytes()
}

pub(super) fn seal(key: &[u8; 32], aad: &[u8], plain: &[u8]) -> Vec<u8> {
    let cipher = Aes256Gcm::new(Key::<Aes256Gcm>::from_slice(key));
    let nonce = Aes256Gcm::generate_nonce(OsRng);
    // Encryption fails only past AES-GCM's 64 GiB message limit; a connection is kilobytes.
    let sealed = cipher
        .encrypt(&nonce, Payload { msg: plain, aad })
        .unwrap_or_default();
    let mut out = Vec::with_capacity(1 + NONCE_BYTES + sealed.len());
    out.push(FORMAT);
    out.extend_from_slice(nonce.as_slice());
    out.extend_from_slice(&sealed);
    out
}

pub(super) fn open(key: &[u8; 32], aad: &[u8], sealed: &[u8]) -> Option<Zeroizing<Vec<u8>>> {
    let (&format, rest) = sealed.split_first()?;
    if format != FORMAT || rest.len() < NONCE_BYTES {
        return None;
    }
    let (nonce, body) = rest.split_at(NONCE_BYTES);
    let cipher = Aes256Gcm::new(Key::<Aes256Gcm>::from_slice(key));
    cipher
        .decrypt(Nonce::from_slice(nonce), Payload { msg: body, aad })
        .ok()
        .map(Zeroizing::new)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_secret_opens_only_for_its_tenant_and_connection_under_its_key() {
        let master = MasterKey::generate();
        let key = DataKey::generate();
        let wrapped = key.wrap(&master, "acme");
        let key = DataKey::unwrap(&master, "acme", &wrapped).unwrap();
        assert!(DataKey::unwrap(&master, "globex", &wrapped).is_err());
        assert!(DataKey::unwrap(&MasterKey::generate(), "acme", &wrapped).is_err());

        let sealed = key.seal_connection("acme", "stripe", b"sk_live_1");
        assert!(!sealed.windows(9).any(|w| w == b"sk_live_1"));
        assert_eq!(
            key.open_connection("acme", "stripe", &sealed)
                .unwrap()
                .as_slice(),
            b"sk_live_1"
        );
        assert!(key.open_connection("globex", "stripe", &sealed).is_err());
        assert!(key.open_connection("acme", "github", &sealed).is_err());
        assert!(
            DataKey::generate()
                .open_connection("acme", "stripe", &sealed)
                .is_err()
        );
        let mut altered = sealed.clone();
        let last = altered.len() - 1;
        altered[last] ^= 1;
        assert!(key.open_connection("acme", "stripe", &altered).is_err());
        assert!(key.open_connection("acme", "stripe", &[]).is_err());
        assert_ne!(sealed, key.seal_connection("acme", "stripe", b"sk_live_1"));
    }
}
