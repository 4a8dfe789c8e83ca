//! The runs list's filters as they stand in the URL (so a filtered view can be shared and
//! reloaded), and, on the server, the store query they mean. The list and the bulk actions read
//! the same filters through the same code; the `ns` filter is handed to
//! [`crate::ssr::SessionView::open`], which honours it for an operator only.

use leptos_router::params::ParamsMap;
use serde::{Deserialize, Serialize};

/// Every filter, as the raw strings of the URL (absent ones empty). Server functions take it
/// whole; a plain form posts it as `filters[status]=…`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Filters {
    pub status: String,
    pub workflow: String,
    pub tag: String,
    pub attr: String,
    pub from: String,
    pub until: String,
    /// A run id: that run and, for a root, everything started under it.
    pub id: String,
    /// A namespace (operators only; a tenant's scope is its session's, whatever this says).
    pub ns: String,
}

impl Filters {
    pub const KEYS: [&'static str; 8] = [
        "status", "workflow", "tag", "attr", "from", "until", "id", "ns",
    ];

    pub fn from_query(q: &ParamsMap) -> Self {
        let get = |k: &str| q.get(k).unwrap_or_default();
        Filters {
            status: get("status"),
            workflow: get("workflow"),
            tag: get("tag"),
            attr: get("attr"),
            from: get("from"),
            until: get("until"),
            id: get("id"),
            ns: get("ns"),
        }
    }

    fn values(&self) -> [&str; 8] {
        [
            &self.status,
            &self.workflow,
            &self.tag,
            &self.attr,
            &self.from,
            &self.until,
            &self.id,
            &self.ns,
        ]
    }

    fn slot(&mut self, key: &str) -> Option<&mut String> {
        Some(match key {
            "status" => &mut self.status,
            "workflow" => &mut self.workflow,
            "tag" => &mut self.tag,
            "attr" => &mut self.attr,
            "from" => &mut self.from,
            "until" => &mut self.until,
            "id" => &mut self.id,
            "ns" => &mut self.ns,
            _ => return None,
        })
    }

    /// These filters with `key` set to `value` (cleared when empty).
    pub fn with(&self, key: &str, value: &str) -> Self {
        let mut f = self.clone();
        if let Some(slot) = f.slot(key) {
            *slot = value.to_owned();
        }
        f
    }

    /// The list's URL with these filters and extra query pairs (a cursor, a bulk preview).
    pub fn href_with(&self, extra: &[(&str, &str)]) -> String {
        let parts: Vec<String> = Self::KEYS
            .iter()
            .copied()
            .zip(self.values())
            .chain(extra.iter().copied())
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, v)| format!("{k}={}", encode(v)))
            .collect();
        if parts.is_empty() {
            "/".to_owned()
        } else {
            format!("/?{}", parts.join("&"))
        }
    }

    /// The list's URL with these filters (and a page cursor).
    pub fn href(&self, after: Option<&str>) -> String {
        self.href_with(&[("after", after.unwrap_or_default())])
    }

    pub fn any(&self) -> bool {
        self.values().iter().any(|v| !v.is_empty())
    }

    /// The filters as `(name, value)` pairs, for hidden form fields.
    pub fn pairs(&self) -> Vec<(&'static str, String)> {
        Self::KEYS
            .iter()
            .copied()
            .zip(self.values().map(str::to_owned))
            .collect()
    }
}

/// Percent-encodes a query value.
pub(crate) fn encode(raw: &str) -> String {
    raw.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(feature = "ssr")]
pub use server::run_query;

#[cfg(feature = "ssr")]
mod server {
    use durable::model::{AttributeFilter, Cursor, RunId, RunQuery, RunStatus};

    use super::Filters;
    use crate::AppError;
    use crate::components::time::parse_date;

    fn nonempty(s: &str) -> Option<String> {
        Some(s.trim().to_owned()).filter(|s| !s.is_empty())
    }

    fn invalid(e: &dyn std::fmt::Display) -> AppError {
        AppError::Invalid(e.to_string())
    }

    /// The store query `f` means; every filter checked, each refusal saying what to fix.
    pub fn run_query(f: &Filters, after: Option<&str>) -> Result<RunQuery, AppError> {
        let status = nonempty(&f.status)
            .map(|s| s.parse::<RunStatus>())
            .transpose()
            .map_err(|e| invalid(&e))?;
        let attribute = nonempty(&f.attr)
            .map(|raw| AttributeFilter::parse(&raw))
            .transpose()
            .map_err(|e| invalid(&e))?;
        let date = |raw: &str, what: &str| {
            nonempty(raw)
                .map(|d| {
                    parse_date(&d).ok_or_else(|| {
                        AppError::Invalid(format!("{what} `{d}` is not a date: use YYYY-MM-DD"))
                    })
                })
                .transpose()
        };
        let family = nonempty(&f.id)
            .map(|id| {
                RunId::parse(&id).map_err(|e| {
                    AppError::Invalid(format!(
                        "run id filter: {e}; paste a run id as shown in the list"
                    ))
                })
            })
            .transpose()?;
        let cursor = after
            .and_then(nonempty)
            .map(|c| Cursor::parse(&c))
            .transpose()
            .map_err(|e| invalid(&e))?;
        Ok(RunQuery {
            status,
            workflow: nonempty(&f.workflow),
            tag: nonempty(&f.tag),
            attribute,
            created_from: date(&f.from, "from")?,
            // `until` is inclusive of its day.
            created_until: date(&f.until, "until")?.map(|ms| ms + 86_400_000),
            family,
            limit: 50,
            cursor,
        })
    }
}
