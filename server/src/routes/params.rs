//! What API handlers read from a request besides the token: a run id in the path, a JSON body,
//! a run list's query parameters. Each refusal is a `400` that says what is wrong.

use axum::body::Bytes;
use durable::model::{AttributeFilter, Cursor, InputLimits, Millis, RunId, RunQuery, RunStatus};
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::error::ApiError;

/// A run id from the URL, or a `400` saying what is wrong with it.
pub(super) fn run_id(raw: &str) -> Result<RunId, ApiError> {
    RunId::parse(raw).map_err(|e| ApiError::BadRequest(e.to_string()))
}

/// Parses a JSON body with a message that says what is wrong and where.
pub(super) fn json_body<T: DeserializeOwned>(body: &Bytes) -> Result<T, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::BadRequest(format!("invalid JSON body: {e}")))
}

/// `GET /runs` query (and `GET /runs/export`'s, without `limit` and `cursor`). Unknown
/// parameters (a `namespace`, say) are ignored: the token decides.
#[derive(Debug, Deserialize)]
pub(super) struct ListParams {
    status: Option<String>,
    workflow: Option<String>,
    tag: Option<String>,
    /// `key=value`.
    attr: Option<String>,
    /// Epoch milliseconds, inclusive.
    #[serde(rename = "createdFrom")]
    created_from: Option<Millis>,
    /// Epoch milliseconds, exclusive.
    #[serde(rename = "createdUntil")]
    created_until: Option<Millis>,
    /// A run id: that run and, for a root, every run started under it.
    id: Option<String>,
    limit: Option<String>,
    cursor: Option<String>,
}

impl ListParams {
    /// The list query these ask for, checked against `limits`.
    pub(super) fn query(self, limits: &InputLimits) -> Result<RunQuery, ApiError> {
        let bad = |e: &dyn std::fmt::Display| ApiError::BadRequest(e.to_string());
        let status = self
            .status
            .filter(|s| !s.is_empty())
            .map(|s| s.parse::<RunStatus>())
            .transpose()
            .map_err(|e| bad(&e))?;
        let limit = match self.limit.filter(|s| !s.is_empty()) {
            None => 0,
            Some(raw) => {
                let n = raw.parse::<u32>().map_err(|_| {
                    ApiError::BadRequest(format!("limit `{raw}` is not a number: use 1 to 200"))
                })?;
                RunQuery::check_limit(n).map_err(|e| bad(&e))?
            }
        };
        let cursor = self
            .cursor
            .filter(|s| !s.is_empty())
            .map(|c| Cursor::parse(&c))
            .transpose()
            .map_err(|e| bad(&e))?;
        let query = RunQuery {
            status,
            workflow: self.workflow.filter(|s| !s.is_empty()),
            tag: self.tag.filter(|s| !s.is_empty()),
            attribute: self
                .attr
                .filter(|s| !s.is_empty())
                .map(|raw| AttributeFilter::parse(&raw))
                .transpose()
                .map_err(|e| bad(&e))?,
            created_from: self.created_from,
            created_until: self.created_until,
            family: self
                .id
                .filter(|s| !s.is_empty())
                .map(|raw| RunId::parse(&raw))
                .transpose()
                .map_err(|e| bad(&e))?,
            limit,
            cursor,
        };
        query.check(limits).map_err(|e| bad(&e))?;
        Ok(query)
    }
}
