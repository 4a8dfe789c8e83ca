//! The isolation boundary between tenants and the control plane: API tokens and the wire's
//! signed tenant tokens, from which every request derives its tenant (never from its body), the
//! [`RunGateway`] verbs and their two implementations, the responder that answers store-less
//! tenant pods, and a tenant's connections sealed for its store-less workers.

mod api_tokens;
mod connections;
mod proxy;
mod responder;
mod store;
mod token;

use async_trait::async_trait;
use serde_json::{Value, json};

use crate::model::{ReplyError, Run, RunId, WorkerGroup};

pub use api_tokens::{
    API_TOKEN_PREFIX, ApiTokenError, check as check_api_token,
    is_configured as is_configured_token, issue as issue_api_token,
};
pub use connections::{RemoteConnections, RemoteConnectionsError};
pub use proxy::ProxyGateway;
pub use responder::RunRequestResponder;
pub use store::StoreGateway;
pub use token::{TenantToken, TokenError, TokenSigner, named_tenant};

/// One tenant's access to runs, the same verbs whether the process owns the store
/// ([`StoreGateway`]) or is a store-less pod asking the control plane ([`ProxyGateway`]). Every
/// verb is a wire body (`{"kind": …}`, aviary wire §4.2); the typed methods build those bodies.
#[async_trait]
pub trait RunGateway: Send + Sync {
    /// Carries out one verb; its data, or why it was refused (`cross-tenant`,
    /// `unauthorized`, `bad-request`, `unknown-verb`).
    async fn request(&self, body: Value) -> Result<Value, ReplyError>;

    /// A run of this tenant; `None` when none has that id.
    async fn get_run(&self, id: &RunId) -> Result<Option<Run>, ReplyError> {
        let data = self
            .request(json!({ "kind": "getRun", "runId": id }))
            .await?;
        decode(data)
    }

    /// This tenant's runs matching a wire query (`{workflow?, status?, tag?, limit?}`).
    async fn list_runs(&self, query: Value) -> Result<Vec<Run>, ReplyError> {
        let data = self
            .request(json!({ "kind": "listRuns", "query": query }))
            .await?;
        decode(data)
    }

    /// Sends signal `name` to one of this tenant's runs.
    async fn signal(&self, id: &RunId, name: &str, payload: Value) -> Result<Value, ReplyError> {
        self.request(json!({ "kind": "signal", "runId": id, "signal": name, "payload": payload }))
            .await
    }

    /// Cancels one of this tenant's runs.
    async fn cancel(&self, id: &RunId) -> Result<Value, ReplyError> {
        self.request(json!({ "kind": "cancel", "runId": id })).await
    }

    /// Starts a run in this tenant (whatever else the body says).
    async fn start(&self, workflow: &str, input: Value) -> Result<RunId, ReplyError> {
        let data = self
            .request(json!({ "kind": "start", "workflow": workflow, "input": input }))
            .await?;
        decode(data["runId"].clone())
    }

    /// The live worker groups of this tenant's partition.
    async fn worker_health(&self) -> Result<Vec<WorkerGroup>, ReplyError> {
        decode(self.request(json!({ "kind": "workerHealth" })).await?)
    }
}

/// Reads a verb's data as `T`.
fn decode<T: serde::de::DeserializeOwned>(data: Value) -> Result<T, ReplyError> {
    serde_json::from_value(data).map_err(|e| ReplyError {
        message: format!("the answer did not have the expected shape: {e}"),
        code: Some("bad-reply".into()),
    })
}
