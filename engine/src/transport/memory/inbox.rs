//! One in-process consumer's waiting tasks, handed out fairly between tenants: a worker pulls
//! a task each time one of its slots frees, and gets the next one of the tenant furthest behind
//! its share, that tenant's steps in turn, rather than the oldest overall. A tenant that queued
//! thousands of slow steps therefore delays another tenant's step by about one slot's turn, not
//! by its whole backlog; and since the inbox knows which tenant holds each of the consumer's
//! slots until the step's result comes back, it keeps the last few for tenants that hold none
//! ([`Headroom`]), so a newcomer's step starts without waiting even that turn.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;

use crate::fair::{FairQueue, Headroom, Weight};
use crate::model::{Namespace, RemoteTask, StepResult};
use crate::transport::Subscription;
use crate::transport::naming::split_token;

/// Tasks waiting for one consumer, by tenant (the token's partition) and step name, and the
/// tenants of the tasks it is running.
pub(super) struct Inbox {
    book: Mutex<Book>,
    ready: Notify,
}

struct Book {
    queue: FairQueue<Namespace, String, RemoteTask>,
    slots: Headroom,
    /// The tasks handed out whose results have not come back, by step id: whose they are, and
    /// how many copies (a step sent again while its first copy runs).
    out: HashMap<String, (Namespace, u32)>,
}

impl Inbox {
    /// The inbox of a consumer that runs `concurrency` tasks at once.
    pub fn new(concurrency: usize) -> Self {
        Inbox {
            book: Mutex::new(Book {
                queue: FairQueue::new(),
                slots: Headroom::new(concurrency),
                out: HashMap::new(),
            }),
            ready: Notify::new(),
        }
    }

    fn book(&self) -> MutexGuard<'_, Book> {
        // A poisoned lock only means a panic between plain map operations.
        self.book.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `task` and wakes the consumer; `weight`, if given, is its tenant's from now on.
    pub fn push(&self, task: RemoteTask, weight: Option<Weight>) {
        let (name, partition) = split_token(&task.group);
        let (name, tenant) = (name.to_owned(), partition.tenant().clone());
        // Within a step, as BullMQ orders a queue: tasks without a priority first, then the
        // higher priority first; equal ones in arrival order.
        let rank = task.priority.map_or(i64::MIN, i64::saturating_neg);
        let mut book = self.book();
        if let Some(weight) = weight {
            book.queue.set_weight(tenant.clone(), weight);
        }
        book.queue.push(tenant, name, rank, task);
        drop(book);
        self.ready.notify_one();
    }

    /// Everything still waiting, for another consumer once this one is gone.
    pub fn drain(&self) -> Vec<RemoteTask> {
        let mut book = self.book();
        std::iter::from_fn(|| book.queue.pop().map(|(_, _, task)| task)).collect()
    }

    /// Notes that `result` came back: if its task was handed out here, its slot is free.
    /// Whether it was.
    pub fn finished(&self, result: &StepResult) -> bool {
        let mut book = self.book();
        let Some((tenant, copies)) = book.out.get_mut(&result.step_id) else {
            return false;
        };
        let tenant = tenant.clone();
        *copies -= 1;
        if *copies == 0 {
            book.out.remove(&result.step_id);
        }
        book.slots.give_back(&tenant);
        drop(book);
        self.ready.notify_one();
        true
    }

    /// The next task the headroom admits, booked to its tenant until its result comes back.
    fn next(&self) -> Option<RemoteTask> {
        let mut book = self.book();
        let Book { queue, slots, out } = &mut *book;
        let (tenant, _, task) = queue.pop_if(|tenant| slots.admits(tenant))?;
        slots.take(&tenant);
        out.entry(task.step_id.clone()).or_insert((tenant, 0)).1 += 1;
        Some(task)
    }

    /// The consumer's stream: the next task whenever one waits and may run. The router holds
    /// the other reference; once the stream is dropped, [`Inbox::is_abandoned`] says so.
    pub fn stream(self: Arc<Self>) -> Subscription<RemoteTask> {
        Box::pin(futures::stream::unfold(self, |inbox| async move {
            loop {
                if let Some(task) = inbox.next() {
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
            traceparent: None,
            attempt: 1,
            reply_to: None,
            priority,
            receipt: Default::default(),
        }
    }

    #[test]
    fn within_a_step_unprioritised_tasks_go_first_then_the_higher_priority() {
        let inbox = Inbox::new(16);
        inbox.push(task("r1", "ship@acme", None), None);
        inbox.push(task("r2", "ship@acme", Some(5)), None);
        inbox.push(task("r3", "ship@acme", Some(-1)), None);
        inbox.push(task("r4", "ship@acme", Some(5)), None);
        let order: Vec<String> = inbox
            .drain()
            .into_iter()
            .map(|t| t.run_id.to_string())
            .collect();
        assert_eq!(order, ["r1", "r2", "r4", "r3"]);
    }

    fn result(task: &RemoteTask) -> StepResult {
        StepResult {
            run_id: task.run_id.clone(),
            seq: task.seq,
            step_id: task.step_id.clone(),
            started_at: None,
            outcome: crate::model::StepOutcome::Completed {
                output: serde_json::Value::Null,
            },
            receipt: Default::default(),
        }
    }

    #[test]
    fn a_busy_tenant_leaves_the_last_slots_to_a_tenant_running_nothing() {
        let inbox = Inbox::new(64);
        for i in 0..100 {
            inbox.push(task(&format!("a{i}"), "ship@acme", None), None);
        }
        let running: Vec<RemoteTask> = std::iter::from_fn(|| inbox.next()).collect();
        assert_eq!(running.len(), 62, "two of 64 slots are headroom");
        inbox.push(task("g1", "ship@globex", None), None);
        inbox.push(task("g2", "ship@globex", None), None);
        let first = inbox
            .next()
            .expect("globex holds nothing: it takes the headroom");
        assert_eq!(first.run_id.to_string(), "g1");
        assert!(inbox.next().is_none(), "globex holds one now");
        // Results free their slots: one for the fair pick (acme's turn: globex entered at
        // acme's place and has been served since), the other headroom again, which globex,
        // holding nothing now, may take.
        assert!(inbox.finished(&result(&running[0])));
        assert!(inbox.finished(&result(&first)));
        assert!(!inbox.finished(&result(&first)), "counted once");
        assert_eq!(inbox.next().unwrap().run_id.to_string(), "a62");
        assert_eq!(inbox.next().unwrap().run_id.to_string(), "g2");
        assert!(inbox.next().is_none());
    }

    #[test]
    fn tenants_are_served_by_the_weights_their_dispatches_carry() {
        let inbox = Inbox::new(64);
        for i in 0..20 {
            inbox.push(
                task(&format!("a{i}"), "ship@acme", None),
                Some(Weight::new(3)),
            );
            inbox.push(task(&format!("g{i}"), "ship@globex", None), None);
        }
        let first: Vec<String> = (0..16)
            .map(|_| inbox.next().unwrap().run_id.to_string())
            .collect();
        let acme = first.iter().filter(|id| id.starts_with('a')).count();
        assert_eq!(acme, 12, "3 of every 4: {first:?}");
    }
}
