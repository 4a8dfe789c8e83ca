//! Opening a tenant's connections: for a step that asks for one (its sealed secrets, from the
//! tenant's kept definitions, opened with the tenant's data key), and for an edit (the tenant's
//! data key, made on its first connection).

use std::collections::BTreeMap;

use super::state::State;
use crate::model::{Connection, ConnectionName, Namespace, StepFailure};
use crate::secrets::{DataKey, MasterKeys, SecretError};
use crate::store::{StoreError, StoredConnection, TenantKey};

/// Unwraps `key` with the master key that wrapped it.
pub(crate) fn unwrap_key(keys: &MasterKeys, key: &TenantKey) -> Result<DataKey, SecretError> {
    let tenant = key.tenant.as_str();
    let master = keys
        .by_id(&key.master_key_id)
        .ok_or_else(|| SecretError::UnknownMasterKey {
            tenant: tenant.to_owned(),
            key_id: key.master_key_id.clone(),
        })?;
    DataKey::unwrap(master, tenant, &key.wrapped)
}

/// The secret fields of `stored`, opened.
pub(crate) fn open_secrets(
    data_key: &DataKey,
    stored: &StoredConnection,
) -> Result<BTreeMap<String, String>, SecretError> {
    let (tenant, name) = (stored.tenant.as_str(), stored.name.as_str());
    let plain = data_key.open_connection(tenant, name, &stored.sealed)?;
    serde_json::from_slice(&plain)
        .map_err(|_| SecretError::Open(format!("the secrets of connection `{name}`")))
}

/// Seals `secrets` as connection `name` of `tenant` keeps them.
pub(crate) fn seal_secrets(
    data_key: &DataKey,
    tenant: &Namespace,
    name: &ConnectionName,
    secrets: &BTreeMap<String, String>,
) -> Vec<u8> {
    let plain = zeroize::Zeroizing::new(serde_json::to_vec(secrets).unwrap_or_default());
    data_key.seal_connection(tenant.as_str(), name.as_str(), &plain)
}

/// `tenant`'s data key, made and stored (wrapped by the current master key) if it has none.
pub(crate) async fn data_key_for_edit(
    state: &State,
    keys: &MasterKeys,
    tenant: &Namespace,
) -> Result<DataKey, ConnectionsError> {
    if let Some(stored) = state.store.tenant_key(tenant).await? {
        return Ok(unwrap_key(keys, &stored)?);
    }
    let fresh = DataKey::generate();
    let key = TenantKey {
        tenant: tenant.clone(),
        master_key_id: keys.current().id().to_owned(),
        wrapped: fresh.wrap(keys.current(), tenant.as_str()),
    };
    // Two first edits at once agree on whichever key was stored first.
    let stored = state.store.create_tenant_key(&key).await?;
    Ok(unwrap_key(keys, &stored)?)
}

/// Why a connection could not be edited or opened.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConnectionsError {
    /// Sealing or opening failed, or there is no master key.
    #[error(transparent)]
    Secret(#[from] SecretError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Connection `name` of `tenant`, secrets opened, for one of its steps; a failure the step
/// fails with otherwise.
pub(crate) async fn open(
    state: &State,
    tenant: &Namespace,
    name: &ConnectionName,
) -> Result<Connection, StepFailure> {
    let Some(keys) = state.config.master_keys.as_ref() else {
        return Err(StepFailure::new(SecretError::NoMasterKey.to_string())
            .with_code("no_master_key")
            .fatal());
    };
    let definitions = state
        .definitions
        .with_connection(&*state.store, tenant, name)
        .await
        .map_err(|e| {
            StepFailure::new(format!("could not read connection `{name}`: {e}"))
                .with_code("store_unavailable")
        })?;
    let Some(stored) = definitions.connections.get(name) else {
        return Err(StepFailure::new(format!(
            "tenant `{tenant}` has no connection `{name}`: create it (PUT /api/v1/connections/{name}, `durable connection put --tenant {tenant} {name}`, or the dashboard's Connections page) or name another"
        ))
        .with_code("unknown_connection")
        .fatal());
    };
    let unreadable = |e: SecretError| {
        StepFailure::new(format!("connection `{name}` cannot be opened: {e}"))
            .with_code("connection_unreadable")
            .fatal()
    };
    let key = definitions.key.as_ref().ok_or_else(|| {
        unreadable(SecretError::Open(format!(
            "the data key of tenant `{tenant}`"
        )))
    })?;
    let data_key = unwrap_key(keys, key).map_err(unreadable)?;
    let secrets = open_secrets(&data_key, stored).map_err(unreadable)?;
    Ok(Connection::new(
        stored.name.clone(),
        stored.kind,
        stored.base_url.clone(),
        stored.headers.clone(),
        secrets,
    ))
}
