//! A list query's filters: which predicates a [`RunQuery`] puts on the runs, and how a page and
//! its cursor are cut from what a store fetched.
//!
//! One rule, two dialects: each store renders every [`Filter`] in its SQL (SQLite drives the
//! scan from a tag's or an attribute's index rows; PostgreSQL uses `jsonb` containment, which
//! its GIN indexes serve), always newest first, fetching [`List::fetch`] rows.

use crate::model::{AttributeFilter, Cursor, Millis, Run, RunId, RunPage, RunQuery, RunStatus};

/// One predicate of a list query, in a store-neutral form.
pub(crate) enum Filter<'q> {
    /// Runs in this status.
    Status(RunStatus),
    /// Runs of this workflow.
    Workflow(&'q str),
    /// Runs carrying this tag.
    Tag(&'q str),
    /// Runs whose search attribute `key` equals `value`.
    Attribute(&'q AttributeFilter),
    /// This run and, when it is a root, every run under it.
    Family(&'q RunId),
    /// Runs created at or after this time.
    CreatedFrom(Millis),
    /// Runs created before this time.
    CreatedUntil(Millis),
    /// Runs after this position of the newest-first order (`(created_at, id)` below it).
    After(&'q Cursor),
}

/// A list query as a store runs it: its filters, in this order, and its page size.
pub(crate) struct List<'q> {
    /// The predicates, all of which a run must meet (the scope is the store's own).
    pub filters: Vec<Filter<'q>>,
    /// How many runs a page holds.
    pub limit: u32,
}

impl<'q> List<'q> {
    /// `query`'s filters and page size.
    pub(crate) fn of(query: &'q RunQuery) -> Self {
        let filters = [
            query.status.map(Filter::Status),
            query.workflow.as_deref().map(Filter::Workflow),
            query.tag.as_deref().map(Filter::Tag),
            query.attribute.as_ref().map(Filter::Attribute),
            query.family.as_ref().map(Filter::Family),
            query.created_from.map(Filter::CreatedFrom),
            query.created_until.map(Filter::CreatedUntil),
            query.cursor.as_ref().map(Filter::After),
        ];
        List {
            filters: filters.into_iter().flatten().collect(),
            limit: query.page_size(),
        }
    }

    /// How many rows to fetch: a page and one more, which tells whether another page follows.
    pub(crate) fn fetch(&self) -> i64 {
        i64::from(self.limit) + 1
    }

    /// The page of `runs` (fetched newest first, at most [`List::fetch`]), with the cursor of
    /// the next page if there is one.
    pub(crate) fn page(&self, mut runs: Vec<Run>) -> RunPage {
        let limit = self.limit as usize;
        let next_cursor = if runs.len() > limit {
            runs.truncate(limit);
            runs.last().map(Cursor::after)
        } else {
            None
        };
        RunPage { runs, next_cursor }
    }
}
