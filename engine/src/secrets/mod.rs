//! Secrets at rest and in flight: the master key the operator provides ([`MasterKeys`]), the
//! envelope that seals a tenant's connection secrets under the tenant's own data key, wrapped by
//! the master key, with the tenant and the connection bound into every ciphertext
//! ([`envelope`]), a connection sealed for the one store-less worker that asked for it
//! ([`exchange`]), and the redaction of secret values from what a step hands back
//! ([`redact`]).

pub mod envelope;
pub mod exchange;
mod master_key;
pub mod redact;

pub use envelope::{DataKey, SecretError};
pub use master_key::{
    KeyError, MASTER_KEY_ENV, MASTER_KEY_FILE_ENV, MasterKey, MasterKeys, PREVIOUS_MASTER_KEY_ENV,
    PREVIOUS_MASTER_KEY_FILE_ENV,
};
