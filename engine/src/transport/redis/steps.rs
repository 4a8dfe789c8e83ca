//! Step tasks and their results on Redis queues ([`crate::transport::StepQueues`]).

use async_trait::async_trait;
use futures::StreamExt;

use super::inbox::Hold;
use super::queue::{NewJob, Retention};
use super::{RedisTransport, consumer, recovery, replies, unavailable};
use crate::model::{RemoteTask, StepResult};
use crate::transport::naming::{
    bull_key, reply_owner_key, reply_queue, reply_queue_owner, results_queue, task_job_id,
    tasks_queue,
};
use crate::transport::{
    StepQueues, Subscription, TaskSubscription, TransportError, TransportResult,
};

#[async_trait]
impl StepQueues for RedisTransport {
    async fn dispatch(&self, mut task: RemoteTask) -> TransportResult<()> {
        self.shared
            .tokens
            .into_wire(&mut task.group)
            .map_err(TransportError::Unsupported)?;
        let queue = tasks_queue(&self.shared.p, &task.group);
        task.reply_to = self.shared.reply_queue.get().cloned();
        let data = serde_json::to_string(&task)
            .map_err(|e| unavailable(format!("encoding a task: {e}")))?;
        // One job per try of a step: sent again while its job still waits or runs (a backlog,
        // a long step on an SDK worker, which holds BullMQ's lock on it), the job stays as it
        // is instead of a second copy running beside it.
        let id = task_job_id(&task.run_id, task.seq, task.attempt);
        self.add_job(NewJob {
            queue: &queue,
            unless_gone: None,
            name: "task",
            data: &data,
            retention: Retention::Task,
            priority: task.priority,
            job_id: Some(&id),
        })
        .await
    }

    async fn consume_tasks(
        &self,
        subscription: TaskSubscription,
    ) -> TransportResult<Subscription<RemoteTask>> {
        let names = subscription.names.clone();
        let tokens = self.shared.tokens.clone();
        let tasks = self.consume_announced::<RemoteTask>(subscription, &names, "task")?;
        Ok(Box::pin(tasks.map(move |(mut task, receipt)| {
            tokens.from_wire(&mut task.group);
            task.receipt = receipt;
            task
        })))
    }

    /// A result whose receipt holds its task (our worker's) is added in one step with the task's
    /// settling: no copy of the task starts after its result exists (see [`super::holds`]).
    async fn publish_result(
        &self,
        result: StepResult,
        reply_to: Option<&str>,
    ) -> TransportResult<()> {
        let data = serde_json::to_string(&result)
            .map_err(|e| unavailable(format!("encoding a result: {e}")))?;
        let p = &self.shared.p;
        let shared = results_queue(p);
        // Only a control plane's own results queue under this prefix: a task cannot send its
        // result anywhere else.
        let owner = reply_to.and_then(|queue| Some((queue, reply_queue_owner(p, queue)?)));
        if let (Some(queue), None) = (reply_to, owner) {
            tracing::warn!(
                reply_to = queue,
                "a task named a results queue that is not a control plane's under this prefix; answering on the shared one"
            );
        }
        let alive = owner.map(|(_, instance)| reply_owner_key(p, instance));
        let job = NewJob {
            queue: owner.map_or(shared.as_str(), |(queue, _)| queue),
            unless_gone: alive.as_deref().map(|alive| (alive, shared.as_str())),
            name: "result",
            data: &data,
            retention: Retention::Message,
            priority: None,
            job_id: None,
        };
        let Some((task, take)) = result.receipt.taken() else {
            return self.add_job(job).await;
        };
        let mut conn = self.shared.conn.clone();
        self.shared
            .scripts
            .answer(&mut conn, &job, self.shared.holds.taken_key(), (task, take))
            .await
            .map_err(|e| unavailable(format!("adding a result to {}: {e}", job.queue)))?;
        result.receipt.settled();
        Ok(())
    }

    /// This control plane's own results queue and the shared one (see [`super::replies`]). Tasks
    /// sent from now on name the own queue.
    async fn consume_results(&self) -> TransportResult<Subscription<StepResult>> {
        let (p, me) = (&self.shared.p, &self.shared.instance);
        let own = reply_queue(p, me);
        let owner = replies::Owner::claim(self.shared.clone())
            .await
            .map_err(|e| unavailable(format!("listing this control plane's results queue: {e}")))?;
        let (tx, rx) = consumer::channel();
        owner.keep(tx.clone());
        recovery::keep(self.shared.clone(), tx.clone());
        consumer::spawn(
            self.shared.clone(),
            vec![own.clone(), results_queue(p)],
            tx,
            true,
        );
        // The key is set: results may come to the own queue from now on.
        let _ = self.shared.reply_queue.set(own);
        // A result applied twice changes nothing: no check before applying it.
        let (results, _alive) =
            Self::parse::<StepResult>(self.shared.clone(), rx, "result", Hold::Yes);
        Ok(Box::pin(results.map(|(mut result, receipt)| {
            result.receipt = receipt;
            result
        })))
    }

    fn retains_tasks(&self) -> bool {
        true
    }

    /// Whether the task's job hash exists and is not finished: waiting, held by one of our
    /// workers or active on an SDK worker. A finished one (failed jobs are kept a day) or a
    /// missing one (completed jobs are removed) is not.
    async fn task_outstanding(&self, task: &RemoteTask) -> TransportResult<bool> {
        let mut group = task.group.clone();
        self.shared
            .tokens
            .into_wire(&mut group)
            .map_err(TransportError::Unsupported)?;
        let id = task_job_id(&task.run_id, task.seq, task.attempt);
        let job = bull_key(&tasks_queue(&self.shared.p, &group), &id);
        let mut conn = self.shared.conn.clone();
        let (name, finished): (Option<String>, Option<String>) = redis::cmd("HMGET")
            .arg(&job)
            .arg("name")
            .arg("finishedOn")
            .query_async(&mut conn)
            .await
            .map_err(|e| unavailable(format!("looking for job {job}: {e}")))?;
        Ok(name.is_some() && finished.is_none())
    }
}
