//! One in-process consumer's waiting tasks, handed out fairly between tenants: a worker pulls
//! a task each time one of its slots frees, and gets the next one of the tenant furthest behind
//! its share, that tenant's steps in turn, rather than the oldest overall. A tenant that queued
//! thousands of slow steps therefore delays another tenant's step by about one slot's turn, not
//! by its whole backlog.

use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;

use crate::fair::FairQueue;
use crate::model::{Namespace, RemoteTask};
use crate::transport::Subscription;
use crate::transport::naming::split_token;

/// Tasks waiting for one consumer, by tenant (the token's partition) and step name.
#[derive(Default)]
pub(super) struct Inbox {
    queue: Mutex<FairQueue<Namespace, String, RemoteTask>>,
    ready: Notify,
}

impl Inbox {
    fn queue(&self) -> MutexGuard<'_, FairQueue<Namespace, String, RemoteTask>> {
        // A poisoned lock only means a panic between plain queue operations.
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `task` and wakes the consumer.
    pub fn push(&self, task: RemoteTask) {
        let (name, tenant) = split_token(&task.group);
        let name = name.to_owned();
        // Within a step, as BullMQ orders a queue: tasks without a priority first, then the
        // higher priority first; equal ones in arrival order.
        let rank = task.priority.map_or(i64::MIN, i64::saturating_neg);
        self.queue().push(tenant, name, rank, task);
        self.ready.notify_one();
    }

    /// Everything still waiting, for another consumer once this one is gone.
    pub fn drain(&self) -> Vec<RemoteTask> {
        let mut queue = self.queue();
        std::iter::from_fn(|| queue.pop().map(|(_, _, task)| task)).collect()
    }

    /// The consumer's stream: the next task whenever one waits. The router holds the other
    /// reference; once the stream is dropped, [`Inbox::is_abandoned`] says so.
    pub fn stream(self: Arc<Self>) -> Subscription<RemoteTask> {
        Box::pin(futures::stream::unfold(self, |inbox| async move {
            loop {
                let next = inbox.queue().pop();
                if let Some((_, _, task)) = next {
                    return Some((task, inbox));
                }
                inbox.ready.notified().await;
            }
        }))
    }

    /// Whether the consumer dropped its stream (only the router holds the inbox).
    pub fn is_abandoned(self: &Arc<Self>) -> bool {
        Arc::strong_count(self) == 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::RunId;

    fn task(run: &str, group: &str, priority: Option<i64>) -> RemoteTask {
        RemoteTask {
            run_id: RunId::parse(run).unwrap(),
            seq: 0,
            name: group.split('@').next().unwrap().into(),
            step_id: format!("{run}:0"),
            group: group.into(),
            input: None,
            context: None,
            attempt: 1,
            reply_to: None,
            priority,
        }
    }

    #[test]
    fn within_a_step_unprioritised_tasks_go_first_then_the_higher_priority() {
        let inbox = Inbox::default();
        inbox.push(task("r1", "ship@acme", None));
        inbox.push(task("r2", "ship@acme", Some(5)));
        inbox.push(task("r3", "ship@acme", Some(-1)));
        inbox.push(task("r4", "ship@acme", Some(5)));
        let order: Vec<String> = inbox
            .drain()
            .into_iter()
            .map(|t| t.run_id.to_string())
            .collect();
        assert_eq!(order, ["r1", "r2", "r4", "r3"]);
    }
}
