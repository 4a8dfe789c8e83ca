use std::sync::Arc;

use super::{RunReads, StoreResult};
use crate::model::{
    ActivityMinute, Checkpoint, Facets, Millis, Namespace, NamespaceLoad, Run, RunId, RunPage,
    RunQuery, Scope, StatusCount, ValueCount,
};

/// A read view of a store confined to one namespace.
///
/// Every tenant request in the dashboard and the API reads through one of these, built from the
/// session or the verified token, so no handler can widen its own query. Writes are not fenced
/// here; they go through the engine, which stamps namespaces from the record.
#[derive(Clone)]
pub struct ScopedStore {
    inner: Arc<dyn RunReads>,
    scope: Scope,
}

impl ScopedStore {
    /// Confines `store` to `namespace`.
    pub fn new(store: Arc<dyn RunReads>, namespace: Namespace) -> Self {
        ScopedStore {
            inner: store,
            scope: Scope::Only(namespace),
        }
    }

    /// The unscoped operator view: every namespace, by explicit choice.
    pub fn operator(store: Arc<dyn RunReads>) -> Self {
        ScopedStore {
            inner: store,
            scope: Scope::All,
        }
    }

    /// What this view can see.
    pub fn scope(&self) -> &Scope {
        &self.scope
    }

    /// One run, if visible.
    pub async fn get_run(&self, id: &RunId) -> StoreResult<Option<Run>> {
        self.inner.get_run(&self.scope, id).await
    }

    /// A page of visible runs.
    pub async fn list_runs(&self, query: &RunQuery) -> StoreResult<RunPage> {
        self.inner.list_runs(&self.scope, query).await
    }

    /// Visible runs per status.
    pub async fn count_by_status(&self) -> StoreResult<Vec<StatusCount>> {
        self.inner.count_by_status(&self.scope).await
    }

    /// Per-namespace load in this view (see [`Store::namespace_loads`]).
    pub async fn namespace_loads(&self, failed_since: Millis) -> StoreResult<Vec<NamespaceLoad>> {
        self.inner.namespace_loads(&self.scope, failed_since).await
    }

    /// Counts by status, workflow and tag in this view.
    pub async fn facets(&self) -> StoreResult<Facets> {
        self.inner.facets(&self.scope).await
    }

    /// The most common values of search attribute `key` in this view.
    pub async fn value_facets(&self, key: &str) -> StoreResult<Vec<ValueCount>> {
        self.inner.value_facets(&self.scope, key).await
    }

    /// A visible run's checkpoints (empty for a run outside the view).
    pub async fn checkpoints(&self, id: &RunId) -> StoreResult<Vec<Checkpoint>> {
        self.inner.checkpoints(&self.scope, id).await
    }

    /// This view's activity minutes from `since_minute` on (its tenant's, or every tenant's
    /// together for an operator).
    pub async fn activity(&self, since_minute: i64) -> StoreResult<Vec<ActivityMinute>> {
        self.inner.activity(&self.scope, since_minute).await
    }
}
