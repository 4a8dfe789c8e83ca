//! Step tasks out to workers and their results back: the core every transport offers.

use async_trait::async_trait;

use crate::model::{RemoteTask, StepResult};
use crate::transport::{Subscription, TaskSubscription, TransportResult};

/// Step tasks and results.
#[async_trait]
pub trait StepQueues: Send + Sync + 'static {
    /// Queues `task` on its routing token (`task.group`).
    async fn dispatch(&self, task: RemoteTask) -> TransportResult<()>;

    /// Consumes tasks for `subscription`; competing consumers each get a share.
    async fn consume_tasks(
        &self,
        subscription: TaskSubscription,
    ) -> TransportResult<Subscription<RemoteTask>>;

    /// Sends a step's result back to the control plane: on the queue its task named
    /// (`reply_to`, see [`RemoteTask::reply_to`]) while the control plane that consumes that
    /// queue is alive, else on the queue every control plane consumes. A result carrying its
    /// task's receipt settles the task with it where the transport can (see
    /// [`crate::model::Receipt::settled`]).
    async fn publish_result(
        &self,
        result: StepResult,
        reply_to: Option<&str>,
    ) -> TransportResult<()>;

    /// Consumes step results (the control plane's side).
    async fn consume_results(&self) -> TransportResult<Subscription<StepResult>>;

    /// Whether queued tasks survive a restart of this process. When they do not (in-process),
    /// the engine re-dispatches every waiting step at start-up.
    fn retains_tasks(&self) -> bool;

    /// Whether `task`'s job (this try of its step, as [`StepQueues::dispatch`] queued it) is
    /// still queued or running. One that is not finished, its result on the way, or was lost:
    /// the redispatch loop sends it again only once it has been gone a while (see
    /// `driver::loops::redispatch`). Asked only of a transport that retains its tasks.
    async fn task_outstanding(&self, task: &RemoteTask) -> TransportResult<bool>;
}
