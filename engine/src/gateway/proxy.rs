//! The [`RunGateway`] of a store-less tenant pod: every verb travels as a run request to the
//! control plane's responder and comes back as its reply. The pod presents its signed token and
//! nothing else; what it may see is decided on the other side.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::RunGateway;
use crate::model::{ReplyError, RunReply};
use crate::transport::{Transport, TransportError};

/// How long a reply may take (the SDKs' value).
const REPLY_TIMEOUT: Duration = Duration::from_secs(10);

type Waiting = Arc<Mutex<HashMap<String, oneshot::Sender<RunReply>>>>;

/// A pod's gateway: requests out through the transport, replies matched by `requestId`.
#[derive(Clone)]
pub struct ProxyGateway {
    transport: Arc<dyn Transport>,
    token: String,
    waiting: Waiting,
}

impl ProxyGateway {
    /// A gateway presenting `token` (from `durable token issue --tenant NAME`). Starts listening
    /// for replies at once, so no reply to a request sent afterwards is missed.
    pub async fn connect(
        transport: Arc<dyn Transport>,
        token: impl Into<String>,
    ) -> Result<Self, TransportError> {
        let mut replies = transport.subscribe_run_replies().await?;
        let waiting: Waiting = Arc::default();
        let deliver = waiting.clone();
        tokio::spawn(async move {
            while let Some(reply) = replies.next().await {
                let waiter = deliver
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&reply.request_id);
                // Replies to other pods' requests share the channel: not ours, not kept.
                if let Some(waiter) = waiter {
                    let _ = waiter.send(reply);
                }
            }
        });
        Ok(ProxyGateway {
            transport,
            token: token.into(),
            waiting,
        })
    }
}

#[async_trait]
impl RunGateway for ProxyGateway {
    async fn request(&self, body: Value) -> Result<Value, ReplyError> {
        let request_id = uuid::Uuid::new_v4().to_string();
        let (tx, rx) = oneshot::channel();
        self.waiting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(request_id.clone(), tx);
        let request = json!({ "requestId": request_id, "tenant": self.token, "body": body });
        let unavailable = |message: String| ReplyError {
            message,
            code: Some("unavailable".into()),
        };
        if let Err(e) = self.transport.send_run_request(request.to_string()).await {
            self.waiting
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&request_id);
            return Err(unavailable(format!("sending the request failed: {e}")));
        }
        let reply = match tokio::time::timeout(REPLY_TIMEOUT, rx).await {
            Ok(Ok(reply)) => reply,
            _ => {
                self.waiting
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&request_id);
                return Err(unavailable(
                    "the control plane did not answer within 10 s; is a control plane running on this Redis and prefix?".into(),
                ));
            }
        };
        match reply.result {
            crate::model::ReplyResult { ok: true, data, .. } => Ok(data.unwrap_or(Value::Null)),
            crate::model::ReplyResult { error, .. } => Err(error.unwrap_or(ReplyError {
                message: "the control plane refused the request".into(),
                code: None,
            })),
        }
    }
}
