//! A tenant's connections: created, changed, listed and deleted by the tenant (through its
//! verified door), their secrets sealed before they reach the store and never read back
//! through any of these verbs; and the source the engine's workers open them from for steps.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;

use super::{Engine, EngineError};
use crate::driver::connections::{
    ConnectionsError, data_key_for_edit, open, open_secrets, seal_secrets,
};
use crate::driver::state::State;
use crate::model::{
    Connection, ConnectionError, ConnectionInfo, ConnectionKind, ConnectionName, ConnectionSpec,
    MAX_CONNECTION_FIELDS, Namespace, SecretField, StepFailure,
};
use crate::runtime::ConnectionSource;
use crate::secrets::{MasterKeys, SecretError};
use crate::store::{ConnectionPut, StoredConnection};

/// How many times an edit reads again when another edit of the connection went first.
const EDIT_ATTEMPTS: usize = 5;

/// What storing a connection did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectionSaved {
    /// The connection as its tenant reads it.
    pub connection: ConnectionInfo,
    /// Whether it was new.
    pub created: bool,
}

impl From<ConnectionsError> for EngineError {
    fn from(e: ConnectionsError) -> Self {
        match e {
            ConnectionsError::Secret(e) => EngineError::Secrets(e),
            ConnectionsError::Store(e) => EngineError::Store(e),
        }
    }
}

/// What a tenant reads of a stored connection.
fn info(stored: &StoredConnection) -> ConnectionInfo {
    ConnectionInfo {
        name: stored.name.clone(),
        kind: stored.kind,
        base_url: stored.base_url.clone(),
        headers: stored.headers.clone(),
        secrets: stored
            .secret_set_at
            .iter()
            .map(|(name, &set_at)| (name.clone(), SecretField { set: true, set_at }))
            .collect(),
        created_at: stored.created_at,
        updated_at: stored.updated_at,
    }
}

/// A connection's secret values, and when each was set, by field.
type Secrets = (BTreeMap<String, String>, BTreeMap<String, i64>);

/// `secrets` and when each was set, after `spec`'s changes at `now`. Header names are matched
/// without regard to case, as HTTP does.
fn merged(
    spec: &ConnectionSpec,
    mut secrets: BTreeMap<String, String>,
    mut set_at: BTreeMap<String, i64>,
    now: i64,
) -> Result<Secrets, ConnectionError> {
    let headers = spec.kind == ConnectionKind::Http;
    for (name, value) in spec.secret_changes() {
        let same = |k: &String| {
            if headers {
                k.eq_ignore_ascii_case(name)
            } else {
                k == name
            }
        };
        secrets.retain(|k, _| !same(k));
        set_at.retain(|k, _| !same(k));
        if let Some(value) = value {
            secrets.insert(name.clone(), value.clone());
            set_at.insert(name.clone(), now);
        }
    }
    if secrets.len() > MAX_CONNECTION_FIELDS {
        return Err(ConnectionError::TooMany(secrets.len()));
    }
    if let Some(twice) = secrets
        .keys()
        .find(|s| spec.headers.keys().any(|h| h.eq_ignore_ascii_case(s)))
    {
        return Err(ConnectionError::Twice(twice.clone()));
    }
    Ok((secrets, set_at))
}

impl Engine {
    fn master_keys(&self) -> Result<&MasterKeys, EngineError> {
        self.state
            .config
            .master_keys
            .as_ref()
            .ok_or(EngineError::Secrets(SecretError::NoMasterKey))
    }

    /// Creates connection `name` of `tenant`, or changes the one it has: the readable fields
    /// are replaced, the secret fields `spec` names are set (or removed, when `null`), the
    /// others kept. Refused past the tenant's plan (`max_connections`), for a change of kind,
    /// or with fields that break the rules; without a master key nothing can be stored.
    pub async fn put_connection(
        &self,
        tenant: &Namespace,
        name: ConnectionName,
        spec: ConnectionSpec,
    ) -> Result<ConnectionSaved, EngineError> {
        spec.check()?;
        let keys = self.master_keys()?;
        let state = &self.state;
        let allowed = self.effective_plan(tenant).await.connections_allowed();
        for _ in 0..EDIT_ATTEMPTS {
            let existing = state.store.connection(tenant, &name).await?;
            if let Some(existing) = &existing
                && existing.kind != spec.kind
            {
                return Err(EngineError::BadInput(format!(
                    "connection `{name}` is a `{}` connection and cannot become a `{}` one: delete it and create it again",
                    existing.kind.as_str(),
                    spec.kind.as_str()
                )));
            }
            let data_key = data_key_for_edit(state, keys, tenant).await?;
            let (secrets, set_at) = match &existing {
                Some(stored) => (
                    open_secrets(&data_key, stored)?,
                    stored.secret_set_at.clone(),
                ),
                None => Default::default(),
            };
            let now = state.clock.now();
            let (secrets, set_at) = merged(&spec, secrets, set_at, now)?;
            let stored = StoredConnection {
                tenant: tenant.clone(),
                name: name.clone(),
                kind: spec.kind,
                base_url: spec.base_url.clone(),
                headers: spec.headers.clone(),
                secret_set_at: set_at,
                sealed: seal_secrets(&data_key, tenant, &name, &secrets),
                revision: existing.as_ref().map_or(0, |e| e.revision),
                created_at: existing.as_ref().map_or(now, |e| e.created_at),
                updated_at: now,
            };
            match state.store.put_connection(&stored, allowed).await? {
                ConnectionPut::Stored { created, version } => {
                    self.announce_definitions(tenant, version).await;
                    return Ok(ConnectionSaved {
                        connection: info(&stored),
                        created,
                    });
                }
                ConnectionPut::Stale => continue,
            }
        }
        Err(EngineError::ConnectionEdited(name))
    }

    /// The connections of `tenant`, by name, without their secret values.
    pub async fn connections(
        &self,
        tenant: &Namespace,
    ) -> Result<Vec<ConnectionInfo>, EngineError> {
        let stored = self.state.store.connections(tenant).await?;
        Ok(stored.iter().map(info).collect())
    }

    /// Connection `name` of `tenant`, without its secret values.
    pub async fn connection(
        &self,
        tenant: &Namespace,
        name: &ConnectionName,
    ) -> Result<Option<ConnectionInfo>, EngineError> {
        let stored = self.state.store.connection(tenant, name).await?;
        Ok(stored.as_ref().map(info))
    }

    /// Deletes connection `name` of `tenant`; whether there was one. A step that asks for it
    /// afterwards fails, saying it is missing.
    pub async fn delete_connection(
        &self,
        tenant: &Namespace,
        name: &ConnectionName,
    ) -> Result<bool, EngineError> {
        let deleted = self.state.store.delete_connection(tenant, name).await?;
        if let Some(version) = deleted {
            self.announce_definitions(tenant, version).await;
        }
        Ok(deleted.is_some())
    }

    /// Where this engine's workers open connections for steps (`WorkerConfig::connections`):
    /// from the tenants' kept definitions, with this engine's master keys.
    pub fn connection_source(&self) -> Arc<dyn ConnectionSource> {
        Arc::new(EngineConnections {
            state: self.state.clone(),
        })
    }
}

/// The engine's [`ConnectionSource`].
struct EngineConnections {
    state: Arc<State>,
}

impl std::fmt::Debug for EngineConnections {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EngineConnections")
    }
}

#[async_trait]
impl ConnectionSource for EngineConnections {
    async fn connection(
        &self,
        tenant: &Namespace,
        name: &ConnectionName,
    ) -> Result<Connection, StepFailure> {
        open(&self.state, tenant, name).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(changes: &[(&str, Option<&str>)]) -> ConnectionSpec {
        ConnectionSpec {
            kind: ConnectionKind::Http,
            base_url: Some("https://a/".into()),
            headers: BTreeMap::new(),
            secret_headers: changes
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.map(str::to_owned)))
                .collect(),
            values: BTreeMap::new(),
        }
    }

    #[test]
    fn an_edit_sets_and_removes_the_secrets_it_names_and_keeps_the_others() {
        let (secrets, set_at) = merged(
            &spec(&[("Authorization", Some("Bearer one")), ("X-Key", Some("k1"))]),
            BTreeMap::new(),
            BTreeMap::new(),
            10,
        )
        .unwrap();
        let (secrets, set_at) = merged(
            &spec(&[("authorization", Some("Bearer two")), ("X-Gone", None)]),
            secrets,
            set_at,
            20,
        )
        .unwrap();
        assert_eq!(
            secrets,
            BTreeMap::from([
                ("X-Key".to_owned(), "k1".to_owned()),
                ("authorization".to_owned(), "Bearer two".to_owned()),
            ])
        );
        assert_eq!(set_at["X-Key"], 10);
        assert_eq!(set_at["authorization"], 20);
        let (secrets, _) = merged(&spec(&[("X-Key", None)]), secrets, set_at, 30).unwrap();
        assert_eq!(secrets.len(), 1);
        let mut clash = spec(&[]);
        clash.headers.insert("x-key".into(), "readable".into());
        assert!(
            merged(
                &clash,
                BTreeMap::from([("X-Key".to_owned(), "k".to_owned())]),
                BTreeMap::new(),
                1
            )
            .is_err(),
            "a readable header may not shadow a kept secret one"
        );
    }
}
