//! The master key: 32 bytes the operator keeps outside the database (`DURABLE_MASTER_KEY`, 64
//! hex characters, or a file holding them, `DURABLE_MASTER_KEY_FILE`). It wraps each tenant's
//! data key and nothing else. A rotation names the new key as the master key and the old one as
//! the previous key (`DURABLE_MASTER_KEY_PREVIOUS[_FILE]`) until `durable connection
//! rotate-key` has rewrapped every data key.

use std::fmt;
use std::path::Path;

use sha2::{Digest, Sha256};
use zeroize::Zeroizing;

/// The variable holding the master key as 64 hex characters.
pub const MASTER_KEY_ENV: &str = "DURABLE_MASTER_KEY";
/// The variable naming a file that holds the master key as 64 hex characters.
pub const MASTER_KEY_FILE_ENV: &str = "DURABLE_MASTER_KEY_FILE";
/// The variable holding the previous master key during a rotation.
pub const PREVIOUS_MASTER_KEY_ENV: &str = "DURABLE_MASTER_KEY_PREVIOUS";
/// The variable naming a file that holds the previous master key during a rotation.
pub const PREVIOUS_MASTER_KEY_FILE_ENV: &str = "DURABLE_MASTER_KEY_PREVIOUS_FILE";

/// Why a master key was refused. The messages never echo the key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// Not 64 hex characters.
    #[error(
        "{0} must be 32 bytes written as 64 hex characters (`openssl rand -hex 32` prints one)"
    )]
    Format(&'static str),
    /// The key file could not be read.
    #[error("cannot read {variable} `{path}`: {error}")]
    File {
        /// The variable that named it.
        variable: &'static str,
        /// The file.
        path: String,
        /// What reading it said.
        error: String,
    },
    /// Both the key and a file were given.
    #[error("set {0} or {0}_FILE, not both")]
    Both(&'static str),
    /// A previous key without a current one.
    #[error(
        "{PREVIOUS_MASTER_KEY_ENV} is set without {MASTER_KEY_ENV}: during a rotation set the new key as {MASTER_KEY_ENV} and the old one as {PREVIOUS_MASTER_KEY_ENV}"
    )]
    PreviousOnly,
}

/// One master key and the id stored beside what it wrapped.
#[derive(Clone)]
pub struct MasterKey {
    id: String,
    bytes: Zeroizing<[u8; 32]>,
}

impl fmt::Debug for MasterKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MasterKey {{ id: {}, key: <redacted> }}", self.id)
    }
}

impl MasterKey {
    /// A key from its 64 hex characters (surrounding whitespace ignored); `variable` names
    /// where it came from in the error.
    pub fn from_hex(hex_key: &str, variable: &'static str) -> Result<Self, KeyError> {
        let text = Zeroizing::new(hex_key.trim().to_owned());
        let mut bytes = Zeroizing::new([0u8; 32]);
        hex::decode_to_slice(text.as_bytes(), bytes.as_mut_slice())
            .map_err(|_| KeyError::Format(variable))?;
        Ok(Self::from_bytes(bytes))
    }

    fn from_bytes(bytes: Zeroizing<[u8; 32]>) -> Self {
        let digest = Sha256::new()
            .chain_update(b"durable.master-key-id/1\0")
            .chain_update(bytes.as_slice())
            .finalize();
        MasterKey {
            id: hex::encode(&digest[..8]),
            bytes,
        }
    }

    /// A random key (tests, and the demo's key file).
    pub fn generate() -> Self {
        let mut bytes = Zeroizing::new([0u8; 32]);
        rand::RngCore::fill_bytes(&mut rand::rngs::OsRng, bytes.as_mut_slice());
        Self::from_bytes(bytes)
    }

    /// The key as 64 hex characters, to write to a key file.
    pub fn to_hex(&self) -> Zeroizing<String> {
        Zeroizing::new(hex::encode(self.bytes.as_slice()))
    }

    /// A short id derived from the key (not the key): kept beside every data key it wraps, so
    /// a rotation knows which are left to rewrap.
    pub fn id(&self) -> &str {
        &self.id
    }

    pub(crate) fn bytes(&self) -> &[u8; 32] {
        &self.bytes
    }
}

/// The master key in force and, during a rotation, the one before it.
#[derive(Clone, Debug)]
pub struct MasterKeys {
    current: MasterKey,
    previous: Option<MasterKey>,
}

impl MasterKeys {
    /// The keys: `current` wraps every new data key, `previous` still unwraps the ones not yet
    /// rewrapped.
    pub fn new(current: MasterKey, previous: Option<MasterKey>) -> Self {
        MasterKeys { current, previous }
    }

    /// The keys the environment gives; `None` when no master key is set.
    pub fn from_env() -> Result<Option<Self>, KeyError> {
        let current = read_key(MASTER_KEY_ENV, MASTER_KEY_FILE_ENV)?;
        let previous = read_key(PREVIOUS_MASTER_KEY_ENV, PREVIOUS_MASTER_KEY_FILE_ENV)?;
        match (current, previous) {
            (Some(current), previous) => Ok(Some(MasterKeys::new(current, previous))),
            (None, Some(_)) => Err(KeyError::PreviousOnly),
            (None, None) => Ok(None),
        }
    }

    /// The key new data keys are wrapped with.
    pub fn current(&self) -> &MasterKey {
        &self.current
    }

    /// The key with `id`, if it is one of these.
    pub fn by_id(&self, id: &str) -> Option<&MasterKey> {
        std::iter::once(&self.current)
            .chain(self.previous.as_ref())
            .find(|k| k.id == id)
    }
}

fn read_key(
    variable: &'static str,
    file_variable: &'static str,
) -> Result<Option<MasterKey>, KeyError> {
    let inline = std::env::var(variable)
        .ok()
        .filter(|v| !v.trim().is_empty());
    let file = std::env::var(file_variable)
        .ok()
        .filter(|v| !v.trim().is_empty());
    match (inline, file) {
        (Some(_), Some(_)) => Err(KeyError::Both(variable)),
        (Some(hex_key), None) => MasterKey::from_hex(&hex_key, variable).map(Some),
        (None, Some(path)) => {
            let text = std::fs::read_to_string(Path::new(&path)).map_err(|e| KeyError::File {
                variable: file_variable,
                path: path.clone(),
                error: e.to_string(),
            })?;
            MasterKey::from_hex(&Zeroizing::new(text), file_variable).map(Some)
        }
        (None, None) => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_64_hex_characters_and_its_id_reveals_nothing_of_it() {
        let key = MasterKey::generate();
        let again =
            MasterKey::from_hex(&format!("  {}\n", key.to_hex().as_str()), MASTER_KEY_ENV).unwrap();
        assert_eq!(key.id(), again.id());
        assert_eq!(key.id().len(), 16);
        assert!(!key.to_hex().contains(key.id()));
        assert!(!format!("{key:?}").contains(key.to_hex().as_str()));
        for bad in ["", "abc", &"g".repeat(64), &"a".repeat(66)] {
            assert_eq!(
                MasterKey::from_hex(bad, MASTER_KEY_ENV).unwrap_err(),
                KeyError::Format(MASTER_KEY_ENV)
            );
        }
        let keys = MasterKeys::new(again, Some(MasterKey::generate()));
        assert!(keys.by_id(key.id()).is_some());
        assert!(keys.by_id("0000000000000000").is_none());
    }
}
