use serde::{Deserialize, Serialize};

use super::limits::is_attribute_key;
use super::{InputError, InputLimits, Millis, Namespace, Run, RunId, RunStatus};

/// The largest page a list call returns.
pub const MAX_PAGE_SIZE: u32 = 200;

/// A filter over runs. The namespace is deliberately absent: it comes from the reader's
/// [`super::Scope`], never from the query.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunQuery {
    /// Only runs in this status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<RunStatus>,
    /// Only runs of this workflow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow: Option<String>,
    /// Only runs carrying this tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    /// Only runs whose search attribute `key` equals `value`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attribute: Option<AttributeFilter>,
    /// Only runs created at or after this time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_from: Option<Millis>,
    /// Only runs created before this time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_until: Option<Millis>,
    /// Only this run and, when it is a root, every run started under it (its children,
    /// their children, ...): what a user pasting a run id wants to see, and the child tree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub family: Option<RunId>,
    /// Page size (1..=[`MAX_PAGE_SIZE`]; 0 means the default of 50).
    #[serde(default)]
    pub limit: u32,
    /// Continue after this position (from [`RunPage::next_cursor`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<Cursor>,
}

/// A search-attribute filter: attribute `key` equals the scalar `value`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AttributeFilter {
    /// The attribute name (letters, digits, `_`, `-`, `.`; at most 64).
    pub key: String,
    /// The value it must equal (a string, number or boolean).
    pub value: serde_json::Value,
}

impl AttributeFilter {
    /// Parses `key=value` as a user types it: the value is a number or boolean when it reads as
    /// one, else a string.
    pub fn parse(raw: &str) -> Result<Self, RunQueryError> {
        let (key, value) = raw
            .split_once('=')
            .ok_or_else(|| RunQueryError::AttributeSyntax(raw.chars().take(64).collect()))?;
        let value = serde_json::from_str::<serde_json::Value>(value.trim())
            .ok()
            .filter(|v| v.is_number() || v.is_boolean())
            .unwrap_or_else(|| serde_json::Value::String(value.trim().to_owned()));
        Self::new(key.trim(), value)
    }

    /// Refuses an attribute name a store cannot index: empty, longer than 64, or with
    /// characters other than letters, digits, `_`, `-` and `.`.
    pub fn check_key(key: &str) -> Result<(), RunQueryError> {
        if is_attribute_key(key) {
            Ok(())
        } else {
            Err(RunQueryError::AttributeKey(key.chars().take(64).collect()))
        }
    }

    /// A filter on `key = value`, refusing keys and values a store cannot index.
    pub fn new(key: &str, value: serde_json::Value) -> Result<Self, RunQueryError> {
        Self::check_key(key)?;
        if !(value.is_string() || value.is_number() || value.is_boolean()) {
            return Err(RunQueryError::AttributeValue(key.to_owned()));
        }
        Ok(AttributeFilter {
            key: key.to_owned(),
            value,
        })
    }
}

/// Counts of runs by status, by workflow and by tag, in one scope.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Facets {
    /// By status, in [`RunStatus::ALL`] order (statuses with no runs omitted).
    pub statuses: Vec<StatusCount>,
    /// By workflow, most runs first.
    pub workflows: Vec<ValueCount>,
    /// By tag, most runs first (the 50 most used).
    pub tags: Vec<ValueCount>,
}

/// How many runs have one value (of a workflow name, a tag or a search attribute).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ValueCount {
    /// The value.
    pub value: serde_json::Value,
    /// How many runs.
    pub count: u64,
}

/// The most values a facet lists.
pub const MAX_FACET_VALUES: usize = 50;

/// Why a query was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunQueryError {
    /// The limit is out of range.
    #[error("limit {0} is out of range: use 1 to 200")]
    Limit(u32),
    /// The cursor was not produced by this server.
    #[error("cursor `{0}` is not valid: pass the `next_cursor` of a previous page unchanged")]
    Cursor(String),
    /// A search-attribute name that cannot be filtered on.
    #[error(
        "attribute `{0}` is not a valid name: use letters, digits, `_`, `-` or `.` (at most 64)"
    )]
    AttributeKey(String),
    /// An attribute filter not written `key=value`.
    #[error("attribute filter `{0}` must look like key=value")]
    AttributeSyntax(String),
    /// A search-attribute value that is not a scalar.
    #[error("attribute `{0}` can only be compared with a string, number or boolean")]
    AttributeValue(String),
}

impl RunQuery {
    /// The page size to use.
    pub fn page_size(&self) -> u32 {
        if self.limit == 0 {
            50
        } else {
            self.limit.min(MAX_PAGE_SIZE)
        }
    }

    /// Refuses filters no run could match and no store should be asked about: a workflow,
    /// tag or attribute value longer than a run may carry, or holding a control character
    /// (U+0000 reaches PostgreSQL as an error, not as "no match").
    pub fn check(&self, limits: &InputLimits) -> Result<(), InputError> {
        if let Some(workflow) = &self.workflow {
            limits.check_name("the workflow filter", workflow)?;
        }
        if let Some(tag) = &self.tag {
            InputLimits::check_text(
                || "the tag filter".to_owned(),
                tag,
                limits.max_tag_chars,
                "tag_chars",
            )?;
        }
        if let Some(AttributeFilter {
            key,
            value: serde_json::Value::String(text),
        }) = &self.attribute
        {
            limits.check_attribute_value(key, text)?;
        }
        Ok(())
    }

    /// Checks a limit taken from user input.
    pub fn check_limit(limit: u32) -> Result<u32, RunQueryError> {
        if (1..=MAX_PAGE_SIZE).contains(&limit) {
            Ok(limit)
        } else {
            Err(RunQueryError::Limit(limit))
        }
    }
}

/// A keyset position: runs are listed newest first by `(created_at, id)`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Cursor {
    /// `created_at` of the last run on the previous page.
    pub created_at: Millis,
    /// `id` of that run.
    pub id: RunId,
}

impl Cursor {
    /// The cursor that continues after `run`.
    pub fn after(run: &Run) -> Self {
        Cursor {
            created_at: run.created_at,
            id: run.id.clone(),
        }
    }

    /// Parses the opaque `<created_at>~<id>` form.
    pub fn parse(raw: &str) -> Result<Self, RunQueryError> {
        let bad = || RunQueryError::Cursor(raw.chars().take(64).collect());
        let (ts, id) = raw.split_once('~').ok_or_else(bad)?;
        Ok(Cursor {
            created_at: ts.parse().map_err(|_| bad())?,
            id: RunId::parse(id).map_err(|_| bad())?,
        })
    }
}

impl TryFrom<String> for Cursor {
    type Error = RunQueryError;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        Cursor::parse(&value)
    }
}

impl From<Cursor> for String {
    fn from(c: Cursor) -> Self {
        format!("{}~{}", c.created_at, c.id)
    }
}

/// One page of runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunPage {
    /// The runs, newest first.
    pub runs: Vec<Run>,
    /// Pass this back to get the next page; absent on the last page.
    pub next_cursor: Option<Cursor>,
}

/// How many runs of one workflow of one tenant are in one status: a `durable_runs` gauge's
/// sample, read from the counts the store keeps with every change (never a scan of runs).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunCount {
    /// The tenant.
    pub namespace: Namespace,
    /// The workflow.
    pub workflow: String,
    /// The status.
    pub status: RunStatus,
    /// How many runs.
    pub count: u64,
}

/// How many runs of one workflow of one tenant ever started and ever finished in each final
/// status: the `durable_runs_started_total` and `durable_runs_finished_total` counters, kept by
/// the store with every change (so exact across control planes and restarts, and never
/// lowered when finished runs are deleted).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunTotals {
    /// The tenant.
    pub namespace: Namespace,
    /// The workflow.
    pub workflow: String,
    /// Runs started.
    pub started: u64,
    /// Runs that reached each final status (a retried run can reach one more than once).
    pub finished: Vec<StatusCount>,
}

/// How many runs are in one status (a facet).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusCount {
    /// The status.
    pub status: RunStatus,
    /// How many runs.
    pub count: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_reject_garbage() {
        let c = Cursor {
            created_at: 42,
            id: RunId::parse("run_x").unwrap(),
        };
        let s: String = c.clone().into();
        assert_eq!(Cursor::parse(&s).unwrap(), c);
        for bad in ["", "42", "x~run", "42~", "42~a b"] {
            assert!(Cursor::parse(bad).is_err(), "{bad:?}");
        }
    }

    // Property tests of the list filters' parsers against any input a URL can carry. They are
    // built with the crate's test support only.
    #[cfg(all(feature = "sqlite", feature = "test-util"))]
    mod hostile {
        use super::*;
        use crate::model::{InputLimits, Namespace, RunStatus};
        use crate::testing::hostile_string;
        use proptest::prelude::*;

        proptest! {
            /// Each parser refuses or accepts without panicking, and what it accepts a store
            /// can hold: an attribute key it can index, no NUL anywhere, a cursor and an id that
            /// read back the same.
            #[test]
            fn list_filter_parsers_accept_only_what_they_can_read_back(
                raw in hostile_string(),
                key in hostile_string(),
            ) {
                let limits = InputLimits::default();
                if let Ok(filter) = AttributeFilter::parse(&format!("{key}={raw}")) {
                    prop_assert!(AttributeFilter::check_key(&filter.key).is_ok());
                    let query = RunQuery { attribute: Some(filter), ..RunQuery::default() };
                    if let (Ok(()), Some(serde_json::Value::String(text))) =
                        (query.check(&limits), query.attribute.as_ref().map(|a| &a.value))
                    {
                        prop_assert!(!text.contains('\0'));
                    }
                }
                let _ = AttributeFilter::parse(&raw);
                if let Ok(cursor) = Cursor::parse(&raw) {
                    let text: String = cursor.clone().into();
                    prop_assert_eq!(Cursor::parse(&text).ok(), Some(cursor));
                }
                if let Ok(id) = RunId::parse(&raw) {
                    prop_assert_eq!(id.as_str(), raw.as_str());
                    prop_assert!(!raw.contains('\0'));
                }
                if let Ok(status) = raw.parse::<RunStatus>() {
                    prop_assert_eq!(status.as_str(), raw.as_str());
                }
                let _ = Namespace::parse(&raw);
                let query = RunQuery {
                    workflow: Some(raw.clone()),
                    tag: Some(key.clone()),
                    ..RunQuery::default()
                };
                if query.check(&limits).is_ok() {
                    prop_assert!(!raw.contains('\0') && !key.contains('\0'));
                }
            }
        }
    }
}
