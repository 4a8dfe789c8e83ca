use serde::{Deserialize, Serialize};

use super::{Millis, Run, RunId, RunStatus};

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
    /// Page size (1..=[`MAX_PAGE_SIZE`]; 0 means the default of 50).
    #[serde(default)]
    pub limit: u32,
    /// Continue after this position (from [`RunPage::next_cursor`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<Cursor>,
}

/// Why a query was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunQueryError {
    /// The limit is out of range.
    #[error("limit {0} is out of range: use 1 to 200")]
    Limit(u32),
    /// The cursor was not produced by this server.
    #[error("cursor `{0}` is not valid: pass the `next_cursor` of a previous page unchanged")]
    Cursor(String),
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
}
