//! What a [`SessionView`] tells about the code that runs: the registered workflows, the live
//! worker groups in its scope, and the command that starts a worker.

use durable::model::WorkerGroup;

use super::SessionView;
use crate::AppError;
use crate::ssr::internal;

impl SessionView {
    /// The workflows this process can start, for the start form.
    pub fn workflow_names(&self) -> Vec<String> {
        self.engine.registry().workflow_names()
    }

    /// The live worker groups this view may see, to tell whether a waiting step has a worker.
    pub async fn live_workers(&self) -> Result<Vec<WorkerGroup>, AppError> {
        self.engine
            .transport()
            .worker_groups(self.scope())
            .await
            .map_err(internal)
    }

    /// The command that starts a worker for `tenant`'s steps: on a namespaced control plane
    /// every queue is its namespace's own, so its workers are started with that namespace.
    pub fn worker_command(&self, tenant: &str) -> String {
        match self.engine.namespace() {
            Some(ns) => format!("durable worker --namespace {ns}"),
            None => format!("durable worker --tenant {tenant}"),
        }
    }
}
