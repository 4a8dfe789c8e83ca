//! The control plane's answer to store-less tenant pods: [`RunRequestResponder`] is the only door
//! through which a pod reads or changes runs (aviary wire §4.2, §5).
//!
//! The tenant comes from the request's signed token alone: a tenant or namespace written in the
//! body is ignored. Listing verbs are confined to that tenant; every verb naming a run loads it
//! first and answers `cross-tenant` when it belongs to another tenant, before anything is read
//! or changed. Unknown verbs and malformed requests get an error; nothing stops the loop. Runs
//! started by a start-run message (an SDK worker's `start_run`) pass the same door.

use futures::StreamExt;
use serde_json::Value;

use super::{RunGateway, StoreGateway, TokenSigner};
use crate::Engine;
use crate::model::RunReply;

/// What reaches the responder: a run request (wire §4.2) or a start-run message (§4.1), raw.
enum Incoming {
    Request(String),
    Start(String),
}

/// Requests answered at once by one responder.
const CONCURRENT: usize = 32;

/// Answers run requests for one control plane.
#[derive(Clone)]
pub struct RunRequestResponder {
    engine: Engine,
    signer: TokenSigner,
}

impl RunRequestResponder {
    /// A responder acting through `engine`, trusting tokens `signer` verifies.
    pub fn new(engine: Engine, signer: TokenSigner) -> Self {
        RunRequestResponder { engine, signer }
    }

    /// Consumes run requests and start-run messages (wire §4.1) from the engine's transport
    /// and publishes the reply each is owed, until the transport closes both streams.
    /// Up to [`CONCURRENT`] are answered at once, so one slow verb does not hold up every pod.
    pub async fn serve(self) -> Result<(), crate::transport::TransportError> {
        let transport = self.engine.transport().clone();
        let requests = transport.consume_run_requests().await?;
        let starts = transport.consume_start_runs().await?;
        let mut incoming =
            futures::stream::select(requests.map(Incoming::Request), starts.map(Incoming::Start));
        let slots = std::sync::Arc::new(tokio::sync::Semaphore::new(CONCURRENT));
        while let Some(message) = incoming.next().await {
            let Ok(slot) = slots.clone().acquire_owned().await else {
                break;
            };
            let (responder, transport) = (self.clone(), transport.clone());
            tokio::spawn(async move {
                let reply = match &message {
                    Incoming::Request(raw) => responder.answer(raw).await,
                    Incoming::Start(raw) => responder.answer_start(raw).await,
                };
                if let Some(reply) = reply
                    && let Err(e) = transport.publish_run_reply(reply).await
                {
                    tracing::warn!(error = %e, "could not publish a run reply");
                }
                drop(slot);
            });
        }
        Ok(())
    }

    /// The reply to one raw start-run message (wire §4.1): the run is started in the tenant of
    /// the message's signed token (`tenant`), with its `runId` if it names one, at most once
    /// for a redelivered message. A started run is always answered, with `requestId` set to
    /// its id; a refused message only when it names a `runId` to answer to (as the aviary
    /// control plane does). Nothing else a message says about tenants is read.
    pub async fn answer_start(&self, raw: &str) -> Option<RunReply> {
        let message = json_object(raw, "start-run message")?;
        let run_id = message.get("runId").and_then(Value::as_str);
        let Some(tenant) = self.tenant_of(&message) else {
            tracing::warn!(
                run_id,
                "refused a start-run message with an invalid tenant token"
            );
            return run_id.map(|id| {
                RunReply::err(
                    id,
                    "invalid or unauthorized tenant token",
                    Some("unauthorized"),
                )
            });
        };
        match StoreGateway::new(self.engine.clone(), tenant.clone())
            .start_once(&message)
            .await
        {
            Ok(run) => Some(RunReply::ok(run.id.as_str(), super::store::started(&run))),
            Err(error) => {
                tracing::warn!(%tenant, run_id, error = %error.message, "refused a start-run message");
                run_id.map(|id| RunReply::failed(id, error))
            }
        }
    }

    /// The tenant whose token `message` carries in `tenant`, if the token is valid.
    fn tenant_of(&self, message: &Value) -> Option<crate::model::Namespace> {
        let token = message.get("tenant").and_then(Value::as_str)?;
        self.signer.verify(token).ok().map(|t| t.tenant)
    }

    /// The reply to one raw request; `None` when it has no `requestId` to answer to (it is
    /// logged and dropped).
    pub async fn answer(&self, raw: &str) -> Option<RunReply> {
        let request = json_object(raw, "run request")?;
        let Some(request_id) = request.get("requestId").and_then(Value::as_str) else {
            tracing::warn!("dropped a run request without a requestId");
            return None;
        };
        let Some(tenant) = self.tenant_of(&request) else {
            return Some(RunReply::err(
                request_id,
                "invalid or unauthorized tenant token",
                Some("unauthorized"),
            ));
        };
        let body = request.get("body").cloned().unwrap_or(Value::Null);
        let gateway = StoreGateway::new(self.engine.clone(), tenant);
        Some(match gateway.request(body).await {
            Ok(data) => RunReply::ok(request_id, data),
            Err(e) => RunReply::failed(request_id, e),
        })
    }
}

/// `raw` parsed as a JSON object; anything else is logged as a dropped `what` and `None`.
fn json_object(raw: &str, what: &str) -> Option<Value> {
    match serde_json::from_str(raw) {
        Ok(v @ Value::Object(_)) => Some(v),
        Ok(_) => {
            tracing::warn!(what, "dropped a message that is not a JSON object");
            None
        }
        Err(e) => {
            tracing::warn!(what, error = %e, "dropped a message that is not JSON");
            None
        }
    }
}
