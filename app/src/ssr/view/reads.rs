//! Reading runs through a [`SessionView`]: every read goes through its store view, so another
//! tenant's run is simply not there.

use durable::model::{
    ActivityMinute, Checkpoint, Facets, Millis, NamespaceLoad, Run, RunId, RunPage, RunQuery,
};

use super::SessionView;
use crate::AppError;
use crate::ssr::{internal, store_error};

impl SessionView {
    /// One run, if this view sees it.
    pub async fn get_run(&self, id: &RunId) -> Result<Option<Run>, AppError> {
        self.reads.get_run(id).await.map_err(internal)
    }

    /// A page of the runs this view sees that match `query`; filters over the input limits
    /// are refused before the store is asked.
    pub async fn list_runs(&self, query: &RunQuery) -> Result<RunPage, AppError> {
        query
            .check(self.engine.limits())
            .map_err(|e| AppError::Invalid(e.to_string()))?;
        self.reads.list_runs(query).await.map_err(store_error)
    }

    /// Counts by status, workflow and tag of the runs this view sees, for the list's facets.
    pub async fn facets(&self) -> Result<Facets, AppError> {
        self.reads.facets().await.map_err(internal)
    }

    /// A visible run's checkpoints (none for a run outside the view).
    pub async fn checkpoints(&self, id: &RunId) -> Result<Vec<Checkpoint>, AppError> {
        self.reads.checkpoints(id).await.map_err(internal)
    }

    /// Per-namespace load of the namespaces this view sees, failures counted since
    /// `failed_since`, for the operator screen.
    pub async fn namespace_loads(
        &self,
        failed_since: Millis,
    ) -> Result<Vec<NamespaceLoad>, AppError> {
        self.reads
            .namespace_loads(failed_since)
            .await
            .map_err(internal)
    }

    /// The activity minutes of this view (its tenant's, or every tenant's together for an
    /// operator not narrowed to one) from `since_minute` on, for the charts.
    pub async fn activity(&self, since_minute: i64) -> Result<Vec<ActivityMinute>, AppError> {
        self.reads.activity(since_minute).await.map_err(internal)
    }
}
