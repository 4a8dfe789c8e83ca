//! A tenant's connections for its store-less workers: the `getConnection` run-request verb (our
//! own; the aviary SDKs do not send it). The worker presents its tenant's signed wire token, as
//! a pod does, with a one-time public key; the control plane answers, for the token's tenant
//! only, with the connection sealed to that key (`crate::secrets::exchange`), so the reply
//! channel every pod hears carries nothing another reader can open.
//!
//! [`RemoteConnections`] is the worker's side: the [`ConnectionSource`] of `durable worker
//! --tenant T` given T's wire token. It keeps what it opened for [`KEPT_FOR`], the same bound
//! within which a control plane sees an edit, and asks once for all the steps that miss
//! together, so the steps that read a connection cost a round trip only once per connection
//! and window.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use zeroize::Zeroizing;

use super::{ProxyGateway, RunGateway};
use crate::Engine;
use crate::model::{
    Connection, ConnectionKind, ConnectionName, Namespace, ReplyError, StepFailure,
};
use crate::runtime::ConnectionSource;
use crate::secrets::exchange::{Requester, SealedReply, seal_for};
use crate::transport::{Transport, TransportError};

/// The verb a worker asks for a connection with.
pub(super) const CONNECTION_VERB: &str = "getConnection";

/// How long a worker keeps a connection it opened before asking again.
const KEPT_FOR: Duration = Duration::from_secs(5);

/// Connections a worker keeps at once (a tenant's plan allows 50 unless raised).
const KEPT_AT_MOST: usize = 1024;

/// A connection as it travels, sealed: never serialized anywhere else.
#[derive(Serialize, Deserialize)]
struct Carried {
    name: ConnectionName,
    kind: ConnectionKind,
    base_url: Option<String>,
    headers: BTreeMap<String, String>,
    secrets: BTreeMap<String, String>,
}

/// What a sealed connection is bound to: its tenant and its name.
fn binding(tenant: &Namespace, name: &ConnectionName) -> String {
    format!("{tenant}\0{name}")
}

fn bad(message: impl Into<String>) -> ReplyError {
    ReplyError {
        message: message.into(),
        code: Some("bad-request".into()),
    }
}

/// The control plane's answer to `getConnection` from `tenant` (verified from its token):
/// `{"publicKey", "sealed"}`, both base64url, or why not (the code a step fails with).
pub(super) async fn answer(
    engine: &Engine,
    tenant: &Namespace,
    body: &Value,
) -> Result<Value, ReplyError> {
    let name = body
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("getConnection needs `name`"))?;
    let name = ConnectionName::parse(name).map_err(|e| bad(e.to_string()))?;
    let public = body
        .get("publicKey")
        .and_then(Value::as_str)
        .and_then(|key| URL_SAFE_NO_PAD.decode(key).ok())
        .ok_or_else(|| {
            bad("getConnection needs `publicKey`: a one-time X25519 public key, base64url")
        })?;
    let connection = engine
        .connection_source()
        .connection(tenant, &name)
        .await
        .map_err(|failure| ReplyError {
            message: failure.message,
            code: failure.code,
        })?;
    let carried = Carried {
        name: connection.name.clone(),
        kind: connection.kind,
        base_url: connection.base_url.clone(),
        headers: connection.headers.clone(),
        secrets: connection
            .secrets()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
    };
    let plain = Zeroizing::new(serde_json::to_vec(&carried).unwrap_or_default());
    let reply =
        seal_for(&public, &binding(tenant, &name), &plain).map_err(|e| bad(e.to_string()))?;
    tracing::debug!(%tenant, connection = %name, "sealed a connection for a worker");
    Ok(json!({
        "publicKey": URL_SAFE_NO_PAD.encode(&reply.public_key),
        "sealed": URL_SAFE_NO_PAD.encode(&reply.sealed),
    }))
}

/// A store-less worker's connections, asked of the control plane with its tenant's wire token.
pub struct RemoteConnections {
    gateway: ProxyGateway,
    tenant: Namespace,
    kept: Mutex<HashMap<ConnectionName, (Instant, Connection)>>,
    /// One ask at a time per name: the steps that miss together wait for the first one's
    /// answer instead of each asking (a burst of a few hundred steps would ask a few hundred
    /// times).
    asking: Mutex<HashMap<ConnectionName, Arc<tokio::sync::Mutex<()>>>>,
}

impl std::fmt::Debug for RemoteConnections {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteConnections")
            .field("tenant", &self.tenant)
            .finish_non_exhaustive()
    }
}

impl RemoteConnections {
    /// Asks through `transport` with `token` (`durable token issue --tenant T --wire`): the
    /// control plane checks it, and answers for its tenant only.
    pub async fn connect(
        transport: Arc<dyn Transport>,
        token: impl Into<String>,
    ) -> Result<Arc<Self>, RemoteConnectionsError> {
        let token = token.into();
        let tenant = super::named_tenant(&token).map_err(|_| RemoteConnectionsError::Token)?;
        let gateway = ProxyGateway::connect(transport, token).await?;
        Ok(Arc::new(RemoteConnections {
            gateway,
            tenant,
            kept: Mutex::default(),
            asking: Mutex::default(),
        }))
    }

    /// The tenant whose token this presents.
    pub fn tenant(&self) -> &Namespace {
        &self.tenant
    }

    fn kept(&self, name: &ConnectionName) -> Option<Connection> {
        let kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        kept.get(name)
            .filter(|(at, _)| at.elapsed() < KEPT_FOR)
            .map(|(_, connection)| connection.clone())
    }

    fn keep(&self, connection: &Connection) {
        let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        if kept.len() >= KEPT_AT_MOST {
            kept.retain(|_, (at, _)| at.elapsed() < KEPT_FOR);
        }
        if kept.len() < KEPT_AT_MOST {
            kept.insert(
                connection.name.clone(),
                (Instant::now(), connection.clone()),
            );
        }
    }

    async fn ask(&self, name: &ConnectionName) -> Result<Connection, StepFailure> {
        let requester = Requester::new().map_err(|e| StepFailure::new(e.to_string()))?;
        let body = json!({
            "kind": CONNECTION_VERB,
            "name": name,
            "publicKey": URL_SAFE_NO_PAD.encode(requester.public_key()),
        });
        let data = self.gateway.request(body).await.map_err(refused)?;
        let field = |key: &str| {
            data.get(key)
                .and_then(Value::as_str)
                .and_then(|v| URL_SAFE_NO_PAD.decode(v).ok())
        };
        let unreadable = || {
            StepFailure::new(format!(
                "the control plane's answer for connection `{name}` does not open: is it a durable control plane of this version?"
            ))
            .with_code("connection_unreadable")
            .fatal()
        };
        let (Some(public_key), Some(sealed)) = (field("publicKey"), field("sealed")) else {
            return Err(unreadable());
        };
        let plain = requester
            .open(
                &SealedReply { public_key, sealed },
                &binding(&self.tenant, name),
            )
            .map_err(|_| unreadable())?;
        let carried: Carried = serde_json::from_slice(&plain).map_err(|_| unreadable())?;
        Ok(Connection::new(
            carried.name,
            carried.kind,
            carried.base_url,
            carried.headers,
            carried.secrets,
        ))
    }
}

/// A refused ask as the step fails with it: the control plane's code, retried only when the
/// control plane or its store was unavailable.
fn refused(error: ReplyError) -> StepFailure {
    let code = error
        .code
        .unwrap_or_else(|| "connections_unavailable".into());
    let message = match code.as_str() {
        "unauthorized" => "the control plane refused this worker's wire token: give the worker its tenant's token from `durable token issue --tenant T --wire` (DURABLE_WIRE_TOKEN)".to_owned(),
        _ => error.message,
    };
    let failure = StepFailure::new(message).with_code(code.clone());
    match code.as_str() {
        "unavailable" | "store_unavailable" => failure,
        _ => failure.fatal(),
    }
}

#[async_trait]
impl ConnectionSource for RemoteConnections {
    async fn connection(
        &self,
        tenant: &Namespace,
        name: &ConnectionName,
    ) -> Result<Connection, StepFailure> {
        if tenant != &self.tenant {
            return Err(StepFailure::new(format!(
                "connection `{name}` of tenant `{tenant}` cannot be read here: this worker holds the wire token of tenant `{}`; route the step to a pool of `{tenant}` served with its own token",
                self.tenant
            ))
            .with_code("connections_unavailable")
            .fatal());
        }
        if let Some(connection) = self.kept(name) {
            return Ok(connection);
        }
        let turn = {
            let mut asking = self.asking.lock().unwrap_or_else(|p| p.into_inner());
            if asking.len() >= KEPT_AT_MOST {
                asking.retain(|_, turn| Arc::strong_count(turn) > 1);
            }
            asking.entry(name.clone()).or_default().clone()
        };
        let _turn = turn.lock().await;
        // The ask this one waited for may have answered it.
        if let Some(connection) = self.kept(name) {
            return Ok(connection);
        }
        let connection = self.ask(name).await?;
        self.keep(&connection);
        Ok(connection)
    }
}

/// Why a worker's connections could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum RemoteConnectionsError {
    /// The token is not `<tenant>.<signature>`.
    #[error(
        "the wire token is malformed: expected `<tenant>.<signature>`, as `durable token issue --tenant T --wire` prints it"
    )]
    Token,
    /// The transport could not subscribe to replies.
    #[error(transparent)]
    Transport(#[from] TransportError),
}
