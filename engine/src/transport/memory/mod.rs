//! The in-process transport: the reference implementation of [`Transport`] for the embedded
//! default. Nothing survives a restart, which [`Transport::retains_tasks`] admits.

mod inbox;
mod rates;
mod slots;

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use futures::StreamExt;
use tokio::sync::{broadcast, mpsc};

use self::inbox::Inbox;
use super::naming::{sanitize, split_token, token_tenant};
use super::{
    ControlChannel, DefinitionNotices, DefinitionsNotice, EventDelivery, Partitions, RemoteTurns,
    RunRequests, StepQueues, Subscription, TaskSubscription, TenantEvents, Transport,
    TransportError, TransportResult, WorkerRegistry,
};
use crate::fair::{self, Weight};
use crate::model::{
    ControlMessage, Heartbeat, Namespace, PoolName, RemoteTask, RunReply, Scope, StepResult,
    TenantEvent, WorkerDescriptor, WorkerGroup,
};

const EVENT_BUFFER: usize = 4096;

/// Queues and channels in this process's memory.
#[derive(Clone)]
pub struct MemoryTransport {
    inner: Arc<Inner>,
}

struct Inner {
    router: Mutex<Router>,
    results_tx: mpsc::UnboundedSender<StepResult>,
    results_rx: Mutex<Option<mpsc::UnboundedReceiver<StepResult>>>,
    events: broadcast::Sender<TenantEvent>,
    control: broadcast::Sender<ControlMessage>,
    definitions: broadcast::Sender<DefinitionsNotice>,
    requests_tx: mpsc::UnboundedSender<String>,
    requests_rx: Mutex<Option<mpsc::UnboundedReceiver<String>>>,
    starts_tx: mpsc::UnboundedSender<String>,
    starts_rx: Mutex<Option<mpsc::UnboundedReceiver<String>>>,
    replies: broadcast::Sender<RunReply>,
    heartbeats: broadcast::Sender<Heartbeat>,
    rates: rates::Allowances,
    slots: slots::Counters,
}

#[derive(Default)]
struct Router {
    consumers: Vec<Consumer>,
    /// Tasks nobody consumes yet, by token, delivered to the first matching consumer.
    backlog: HashMap<String, VecDeque<RemoteTask>>,
    next: usize,
    /// Consumers ever added, which numbers their instance ids.
    instances: usize,
}

struct Consumer {
    names: HashSet<String>,
    partitions: Partitions,
    /// What it announces, as a worker on a shared broker would.
    descriptor: WorkerDescriptor,
    /// Its tasks, released fairly between tenants.
    inbox: Arc<Inbox>,
}

impl Consumer {
    fn serves(&self, token: &str) -> bool {
        let (name, partition) = split_token(token);
        self.names.contains(name)
            && match &self.partitions {
                Partitions::All => true,
                Partitions::Only(ps) => ps.contains(&partition),
                Partitions::Shared(_) => false,
            }
    }
}

impl Default for MemoryTransport {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryTransport {
    /// A fresh, empty transport.
    pub fn new() -> Self {
        let (results_tx, results_rx) = mpsc::unbounded_channel();
        let (events, _) = broadcast::channel(EVENT_BUFFER);
        let (control, _) = broadcast::channel(EVENT_BUFFER);
        let (definitions, _) = broadcast::channel(EVENT_BUFFER);
        let (requests_tx, requests_rx) = mpsc::unbounded_channel();
        let (starts_tx, starts_rx) = mpsc::unbounded_channel();
        let (replies, _) = broadcast::channel(EVENT_BUFFER);
        let (heartbeats, _) = broadcast::channel(EVENT_BUFFER);
        MemoryTransport {
            inner: Arc::new(Inner {
                router: Mutex::new(Router::default()),
                results_tx,
                results_rx: Mutex::new(Some(results_rx)),
                events,
                control,
                definitions,
                requests_tx,
                requests_rx: Mutex::new(Some(requests_rx)),
                starts_tx,
                starts_rx: Mutex::new(Some(starts_rx)),
                replies,
                heartbeats,
                rates: rates::Allowances::default(),
                slots: slots::Counters::default(),
            }),
        }
    }

    /// The router, without the consumers that have gone (their waiting tasks back in the
    /// backlog, for the next consumer of their token).
    fn router(&self) -> MutexGuard<'_, Router> {
        // A poisoned lock only means another thread panicked mid-update of plain queues; the
        // data is still consistent enough to keep routing.
        let mut router = self.inner.router.lock().unwrap_or_else(|p| p.into_inner());
        if !router.consumers.iter().any(|c| c.inbox.is_abandoned()) {
            return router;
        }
        let (gone, live): (Vec<Consumer>, Vec<Consumer>) = std::mem::take(&mut router.consumers)
            .into_iter()
            .partition(|c| c.inbox.is_abandoned());
        router.consumers = live;
        for consumer in gone {
            for task in consumer.inbox.drain() {
                router.route(task, None);
            }
        }
        router
    }
}

impl Router {
    /// Hands `task` to the next consumer that serves its token, or keeps it until one comes;
    /// `weight` is its tenant's, when the dispatch said.
    fn route(&mut self, task: RemoteTask, weight: Option<Weight>) {
        let matching: Vec<usize> = (0..self.consumers.len())
            .filter(|&i| self.consumers[i].serves(&task.group))
            .collect();
        if matching.is_empty() {
            // A step sent again while nobody serves its token replaces its earlier copy, so a
            // token nobody serves does not pile up redispatches.
            let queue = self.backlog.entry(task.group.clone()).or_default();
            match queue.iter_mut().find(|t| t.step_id == task.step_id) {
                Some(earlier) => *earlier = task,
                None => queue.push_back(task),
            }
            return;
        }
        let pick = matching[self.next % matching.len()];
        self.next = self.next.wrapping_add(1);
        self.consumers[pick].inbox.push(task, weight);
    }
}

/// The one consumer of a queue only one process side reads (results, run requests): the first
/// caller takes the receiver; a second is refused.
fn sole_consumer<T: Send + 'static>(
    slot: &Mutex<Option<mpsc::UnboundedReceiver<T>>>,
    what: &str,
) -> TransportResult<Subscription<T>> {
    let rx = slot
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take()
        .ok_or_else(|| {
            TransportError::Unsupported(format!(
                "the in-process transport has one consumer of {what}, already taken"
            ))
        })?;
    Ok(Box::pin(futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    })))
}

/// Everything sent on `channel` from now on. A message a slow reader missed is skipped: what
/// travels on these channels (control notices, replies, beats, relays) are hints, each backed
/// by a retry or a timeout.
fn listen<T: Clone + Send + 'static>(channel: &broadcast::Sender<T>) -> Subscription<T> {
    Box::pin(futures::stream::unfold(
        channel.subscribe(),
        |mut rx| async move {
            loop {
                match rx.recv().await {
                    Ok(item) => return Some((item, rx)),
                    Err(broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(broadcast::error::RecvError::Closed) => return None,
                }
            }
        },
    ))
}

#[async_trait]
impl StepQueues for MemoryTransport {
    async fn dispatch(&self, task: RemoteTask) -> TransportResult<()> {
        // The driver dispatches in the lane of the task's tenant, which carries its weight.
        let lane = fair::Lane::current();
        let weight = (lane.tenant == token_tenant(&task.group)).then_some(lane.weight);
        self.router().route(task, weight);
        Ok(())
    }

    async fn consume_tasks(
        &self,
        subscription: TaskSubscription,
    ) -> TransportResult<Subscription<RemoteTask>> {
        if let Partitions::Shared(pool) = &subscription.partitions {
            return Err(TransportError::Unsupported(format!(
                "shared pool `{pool}` is served on a shared broker (Redis); in one process, its one worker serves every partition already"
            )));
        }
        let mut router = self.router();
        router.instances += 1;
        let descriptor = subscription.descriptor(&format!("mem-{}", router.instances), 0);
        let consumer = Consumer {
            names: subscription.names.iter().map(|n| sanitize(n)).collect(),
            partitions: subscription.partitions,
            descriptor,
            inbox: Arc::new(Inbox::new(subscription.concurrency)),
        };
        let tokens: Vec<String> = router
            .backlog
            .keys()
            .filter(|t| consumer.serves(t))
            .cloned()
            .collect();
        for token in tokens {
            for task in router.backlog.remove(&token).unwrap_or_default() {
                consumer.inbox.push(task, None);
            }
        }
        let tasks = consumer.inbox.clone().stream();
        router.consumers.push(consumer);
        Ok(tasks)
    }

    /// One process has one results queue: `reply_to` has nothing to choose between. The
    /// consumer that ran the task gets its slot back.
    async fn publish_result(
        &self,
        result: StepResult,
        _reply_to: Option<&str>,
    ) -> TransportResult<()> {
        for consumer in &self.router().consumers {
            if consumer.inbox.finished(&result) {
                break;
            }
        }
        self.inner
            .results_tx
            .send(result)
            .map_err(|_| TransportError::Closed)
    }

    async fn consume_results(&self) -> TransportResult<Subscription<StepResult>> {
        sole_consumer(&self.inner.results_rx, "step results")
    }

    fn retains_tasks(&self) -> bool {
        false
    }

    /// A task of this process is never lost, and one of another process is gone with it.
    async fn task_outstanding(&self, _task: &RemoteTask) -> TransportResult<bool> {
        Ok(false)
    }
}

#[async_trait]
impl TenantEvents for MemoryTransport {
    async fn publish_event(&self, event: TenantEvent) -> TransportResult<()> {
        // No subscribers is fine: nobody is watching.
        let _ = self.inner.events.send(event);
        Ok(())
    }

    async fn subscribe_events(&self, scope: Scope) -> TransportResult<Subscription<EventDelivery>> {
        let rx = self.inner.events.subscribe();
        let stream = futures::stream::unfold(rx, |mut rx| async move {
            match rx.recv().await {
                Ok(ev) => Some((EventDelivery::Event(ev), rx)),
                Err(broadcast::error::RecvError::Lagged(n)) => Some((EventDelivery::Lagged(n), rx)),
                Err(broadcast::error::RecvError::Closed) => None,
            }
        })
        .filter(move |d| {
            let keep = match d {
                EventDelivery::Event(ev) => scope.admits(&ev.namespace),
                EventDelivery::Lagged(_) => true,
            };
            futures::future::ready(keep)
        });
        Ok(Box::pin(stream))
    }
}

#[async_trait]
impl ControlChannel for MemoryTransport {
    async fn publish_control(&self, message: ControlMessage) -> TransportResult<()> {
        // No subscribers is fine: no worker is running here.
        let _ = self.inner.control.send(message);
        Ok(())
    }

    async fn subscribe_control(&self) -> TransportResult<Subscription<ControlMessage>> {
        // A missed cancel notice is only a lost hint: the engine also drops results for
        // cancelled runs.
        Ok(listen(&self.inner.control))
    }
}

/// In one process the only control plane is this one.
#[async_trait]
impl DefinitionNotices for MemoryTransport {
    fn reaches_peers(&self) -> bool {
        false
    }

    async fn publish_definitions(&self, notice: DefinitionsNotice) -> TransportResult<()> {
        let _ = self.inner.definitions.send(notice);
        Ok(())
    }

    async fn subscribe_definitions(&self) -> TransportResult<Subscription<DefinitionsNotice>> {
        Ok(listen(&self.inner.definitions))
    }
}

#[async_trait]
impl WorkerRegistry for MemoryTransport {
    async fn worker_groups(&self, scope: &Scope) -> TransportResult<Vec<WorkerGroup>> {
        let router = self.router();
        let mut groups = std::collections::BTreeMap::<String, WorkerGroup>::new();
        for consumer in &router.consumers {
            let partitions = match &consumer.partitions {
                Partitions::All => vec![None],
                Partitions::Shared(_) => Vec::new(),
                Partitions::Only(ps) => ps
                    .iter()
                    .filter(|p| scope.admits(p.tenant()))
                    .cloned()
                    .map(Some)
                    .collect(),
            };
            for name in &consumer.names {
                for partition in &partitions {
                    let group = WorkerGroup {
                        name: name.clone(),
                        partition: partition.clone(),
                        workers: 0,
                        last_seen: None,
                    };
                    groups.entry(group.token()).or_insert(group).workers += 1;
                }
            }
        }
        Ok(groups.into_values().collect())
    }

    async fn worker_descriptors(&self, token: &str) -> TransportResult<Vec<WorkerDescriptor>> {
        let router = self.router();
        Ok(router
            .consumers
            .iter()
            .filter(|c| c.serves(token))
            .map(|c| c.descriptor.clone())
            .collect())
    }

    async fn publish_heartbeat(&self, beat: Heartbeat) -> TransportResult<()> {
        let _ = self.inner.heartbeats.send(beat);
        Ok(())
    }

    async fn subscribe_heartbeats(&self) -> TransportResult<Subscription<Heartbeat>> {
        Ok(listen(&self.inner.heartbeats))
    }

    async fn publish_grants(
        &self,
        _pool: &PoolName,
        _grants: &[(Namespace, u32)],
    ) -> TransportResult<()> {
        Ok(())
    }
}

/// No worker in this process runs workflow turns: the in-process engine turns its own
/// workflows, and a run of a workflow it lacks parks until a process that has it starts.
impl Transport for MemoryTransport {
    fn remote_turns(&self) -> Option<&dyn RemoteTurns> {
        None
    }
}

#[async_trait]
impl RunRequests for MemoryTransport {
    async fn send_run_request(&self, request: String) -> TransportResult<()> {
        self.inner
            .requests_tx
            .send(request)
            .map_err(|_| TransportError::Closed)
    }

    async fn consume_run_requests(&self) -> TransportResult<Subscription<String>> {
        sole_consumer(&self.inner.requests_rx, "run requests")
    }

    async fn send_start_run(&self, message: String) -> TransportResult<()> {
        self.inner
            .starts_tx
            .send(message)
            .map_err(|_| TransportError::Closed)
    }

    async fn consume_start_runs(&self) -> TransportResult<Subscription<String>> {
        sole_consumer(&self.inner.starts_rx, "start-run messages")
    }

    async fn publish_run_reply(&self, reply: RunReply) -> TransportResult<()> {
        // No listener is not an error: nobody was waiting for this reply.
        let _ = self.inner.replies.send(reply);
        Ok(())
    }

    async fn subscribe_run_replies(&self) -> TransportResult<Subscription<RunReply>> {
        Ok(listen(&self.inner.replies))
    }
}
