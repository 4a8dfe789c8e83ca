//! The control plane's answer to store-less tenant pods: [`RunRequestResponder`] is the only door
//! through which a pod reads or changes runs (aviary wire §4.2, §5).
//!
//! The tenant comes from the request's signed token alone: a tenant or namespace written in the
//! body is ignored. Listing verbs are confined to that tenant; every verb naming a run loads it
//! first and answers `cross-tenant` when it belongs to another tenant, before anything is read
//! or changed. Unknown verbs and malformed requests get an error; nothing stops the loop.

use futures::StreamExt;
use serde_json::Value;

use super::{RunGateway, StoreGateway, TokenSigner};
use crate::driver::Engine;
use crate::model::RunReply;

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

    /// Consumes run requests from the engine's transport and publishes a reply to each, until
    /// the transport closes the stream.
    /// Up to [`CONCURRENT`] requests are answered at once, so one slow verb does not hold up
    /// every pod.
    pub async fn serve(self) -> Result<(), crate::transport::TransportError> {
        let transport = self.engine.transport().clone();
        let mut requests = transport.consume_run_requests().await?;
        let slots = std::sync::Arc::new(tokio::sync::Semaphore::new(CONCURRENT));
        while let Some(raw) = requests.next().await {
            let Ok(slot) = slots.clone().acquire_owned().await else {
                break;
            };
            let (responder, transport) = (self.clone(), transport.clone());
            tokio::spawn(async move {
                if let Some(reply) = responder.answer(&raw).await
                    && let Err(e) = transport.publish_run_reply(reply).await
                {
                    tracing::warn!(error = %e, "could not publish a run reply");
                }
                drop(slot);
            });
        }
        Ok(())
    }

    /// The reply to one raw request; `None` when it has no `requestId` to answer to (it is
    /// logged and dropped).
    pub async fn answer(&self, raw: &str) -> Option<RunReply> {
        let request: Value = match serde_json::from_str(raw) {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!(error = %e, "dropped a run request that is not JSON");
                return None;
            }
        };
        let Some(request_id) = request.get("requestId").and_then(Value::as_str) else {
            tracing::warn!("dropped a run request without a requestId");
            return None;
        };
        let tenant = match request
            .get("tenant")
            .and_then(Value::as_str)
            .map(|t| self.signer.verify(t))
        {
            Some(Ok(token)) => token.tenant,
            _ => {
                return Some(RunReply::err(
                    request_id,
                    "invalid or unauthorized tenant token",
                    Some("unauthorized"),
                ));
            }
        };
        let body = request.get("body").cloned().unwrap_or(Value::Null);
        let gateway = StoreGateway::new(self.engine.clone(), tenant);
        Some(match gateway.request(body).await {
            Ok(data) => RunReply::ok(request_id, data),
            Err(e) => RunReply {
                request_id: request_id.to_owned(),
                result: crate::model::ReplyResult {
                    ok: false,
                    data: None,
                    error: Some(e),
                },
            },
        })
    }
}
