//! Run requests and replies between a store-less tenant pod and the control plane (aviary wire
//! §4.2): a request names the tenant only through its signed token, and every reply carries the
//! request's id, since all pods share one reply channel.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A reply to one run request (`P-run-reply`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunReply {
    /// Echo of the request's id.
    pub request_id: String,
    /// What the verb gave, or why it failed.
    pub result: ReplyResult,
}

/// `{"ok": true, "data": …}` or `{"ok": false, "error": {message, code?}}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReplyResult {
    /// Whether the verb succeeded.
    pub ok: bool,
    /// Its answer (`null` for a run that does not exist).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ReplyError>,
}

/// A refused or failed request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplyError {
    /// For a person.
    pub message: String,
    /// Stable: `unauthorized`, `cross-tenant`, `bad-request`, `unknown-verb`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
}

impl RunReply {
    /// A successful reply.
    pub fn ok(request_id: impl Into<String>, data: Value) -> Self {
        RunReply {
            request_id: request_id.into(),
            result: ReplyResult {
                ok: true,
                data: Some(data),
                error: None,
            },
        }
    }

    /// A refusal with a machine `code`.
    pub fn err(
        request_id: impl Into<String>,
        message: impl Into<String>,
        code: Option<&str>,
    ) -> Self {
        let error = ReplyError {
            message: message.into(),
            code: code.map(str::to_owned),
        };
        RunReply::failed(request_id, error)
    }

    /// A failed reply carrying `error`.
    pub fn failed(request_id: impl Into<String>, error: ReplyError) -> Self {
        RunReply {
            request_id: request_id.into(),
            result: ReplyResult {
                ok: false,
                data: None,
                error: Some(error),
            },
        }
    }

    /// The error code, if this is a refusal.
    pub fn code(&self) -> Option<&str> {
        self.result.error.as_ref().and_then(|e| e.code.as_deref())
    }
}
