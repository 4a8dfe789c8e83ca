//! Tenants' connections and their data keys. A connection's secrets are kept sealed (the engine
//! seals and opens them, `crate::secrets`): the store sees only ciphertext, and the tenant's
//! data key only wrapped by a master key. An edit of a connection bumps the tenant's
//! definitions version, as an edit of its pools does, so every control plane's copy is renewed.

use std::collections::BTreeMap;

use async_trait::async_trait;

use super::StoreResult;
use crate::model::{ConnectionKind, ConnectionName, Millis, Namespace};

/// A connection as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredConnection {
    /// Whose it is.
    pub tenant: Namespace,
    /// Its name within the tenant.
    pub name: ConnectionName,
    /// What it is for.
    pub kind: ConnectionKind,
    /// `http`: the base URL.
    pub base_url: Option<String>,
    /// `http`: the readable headers.
    pub headers: BTreeMap<String, String>,
    /// When each secret field was set, by name.
    pub secret_set_at: BTreeMap<String, Millis>,
    /// The secret fields, sealed under the tenant's data key for this tenant and connection.
    pub sealed: Vec<u8>,
    /// Counts its writes: a write names the revision it read ([`Connections::put_connection`]).
    pub revision: i64,
    /// When it was created.
    pub created_at: Millis,
    /// When it was last changed.
    pub updated_at: Millis,
}

/// A tenant's data key, wrapped by a master key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TenantKey {
    /// Whose key it is.
    pub tenant: Namespace,
    /// The id of the master key that wrapped it.
    pub master_key_id: String,
    /// The data key, wrapped for this tenant.
    pub wrapped: Vec<u8>,
}

/// What storing a connection did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConnectionPut {
    /// Stored; whether it was new, and the tenant's definitions version after it.
    Stored {
        /// Whether it was new.
        created: bool,
        /// The tenant's definitions version after the edit.
        version: u64,
    },
    /// Not stored: it was written (or created, or deleted) since the revision the write read.
    Stale,
}

/// Connections and the data keys that seal them: per tenant, edited by its admins, read by
/// every control plane that runs its steps.
#[async_trait]
pub trait Connections: Send + Sync + 'static {
    /// Stores `connection` at `revision + 1` if the stored one is still at `connection.revision`
    /// (0: there is none yet). Creating one more than `max_per_tenant` is refused
    /// ([`crate::store::StoreError::Refused`]).
    async fn put_connection(
        &self,
        connection: &StoredConnection,
        max_per_tenant: usize,
    ) -> StoreResult<ConnectionPut>;

    /// The connections of `tenant`, by name.
    async fn connections(&self, tenant: &Namespace) -> StoreResult<Vec<StoredConnection>>;

    /// Connection `name` of `tenant`.
    async fn connection(
        &self,
        tenant: &Namespace,
        name: &ConnectionName,
    ) -> StoreResult<Option<StoredConnection>>;

    /// Deletes connection `name` of `tenant`; the tenant's definitions version after it, or
    /// `None` when there was none.
    async fn delete_connection(
        &self,
        tenant: &Namespace,
        name: &ConnectionName,
    ) -> StoreResult<Option<u64>>;

    /// Whether any tenant keeps a connection (a server without a master key refuses to start
    /// then).
    async fn any_connections(&self) -> StoreResult<bool>;

    /// `tenant`'s data key, if it has one.
    async fn tenant_key(&self, tenant: &Namespace) -> StoreResult<Option<TenantKey>>;

    /// Stores `key` unless its tenant has one already; the one stored either way (two control
    /// planes creating a tenant's first connection at once agree on one key).
    async fn create_tenant_key(&self, key: &TenantKey) -> StoreResult<TenantKey>;

    /// Every tenant's data key (a master key rotation rewraps them).
    async fn tenant_keys(&self) -> StoreResult<Vec<TenantKey>>;

    /// Replaces the wrapping of `key.tenant`'s data key if it is still wrapped by
    /// `previous_key_id`; whether it was replaced.
    async fn rewrap_tenant_key(&self, key: &TenantKey, previous_key_id: &str) -> StoreResult<bool>;
}
