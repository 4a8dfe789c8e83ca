//! The master keys against what is stored: a server checks at start that it can open every
//! tenant's data key (or, without a master key, that there is nothing to open), and a rotation
//! rewraps every data key under the current master key.

use super::{Engine, EngineError};
use crate::driver::connections::unwrap_key;
use crate::secrets::SecretError;
use crate::store::TenantKey;

/// What a rotation did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rotation {
    /// Data keys rewrapped under the current master key.
    pub rewrapped: usize,
    /// Data keys already wrapped by it.
    pub current: usize,
}

impl Engine {
    /// Refuses a server that could not open the connections it keeps: one without a master
    /// key while connections exist, or one whose master keys did not wrap every tenant's data
    /// key. The error names what to set.
    pub async fn check_master_keys(&self) -> Result<(), EngineError> {
        let store = &self.state.store;
        let Some(keys) = &self.state.config.master_keys else {
            return match store.any_connections().await? {
                true => Err(EngineError::Secrets(SecretError::NoMasterKey)),
                false => Ok(()),
            };
        };
        for key in store.tenant_keys().await? {
            if keys.by_id(&key.master_key_id).is_none() {
                return Err(EngineError::Secrets(SecretError::UnknownMasterKey {
                    tenant: key.tenant.to_string(),
                    key_id: key.master_key_id,
                }));
            }
        }
        Ok(())
    }

    /// Rewraps every tenant's data key not yet wrapped by the current master key (each opened
    /// with the previous key, or whichever of the keys wrapped it). The connections' sealed
    /// secrets are untouched: the data keys stay the same. Safe to run again, and beside
    /// running servers that hold both keys.
    pub async fn rotate_master_key(&self) -> Result<Rotation, EngineError> {
        let store = &self.state.store;
        let keys = self
            .state
            .config
            .master_keys
            .as_ref()
            .ok_or(EngineError::Secrets(SecretError::NoMasterKey))?;
        let current = keys.current();
        let mut rotation = Rotation::default();
        for key in store.tenant_keys().await? {
            if key.master_key_id == current.id() {
                rotation.current += 1;
                continue;
            }
            let data_key = unwrap_key(keys, &key)?;
            let rewrapped = TenantKey {
                tenant: key.tenant.clone(),
                master_key_id: current.id().to_owned(),
                wrapped: data_key.wrap(current, key.tenant.as_str()),
            };
            if store
                .rewrap_tenant_key(&rewrapped, &key.master_key_id)
                .await?
            {
                rotation.rewrapped += 1;
            } else {
                // Another rotation went first: it is wrapped by the current key now.
                rotation.current += 1;
            }
        }
        Ok(rotation)
    }
}
