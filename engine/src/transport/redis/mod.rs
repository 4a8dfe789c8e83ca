//! The Redis transport: the aviary wire on BullMQ-compatible queues (`docs/WIRE.md`), so a
//! control plane, our Rust workers and the unmodified Node and Python SDK workers share one
//! Redis. Step tasks go to `P-tasks-<name@partition>`, results come back on the sending
//! control plane's own `P-results-<instance>` or on the shared `P-results` (see [`replies`]),
//! cancels travel on `P-control`, tenant events on `P-tenant-events-<namespace>`, and every
//! consuming process announces itself with liveness and descriptor keys.
//!
//! Queue operations are our own Lua scripts written from the documented key layout
//! ([`queue`]); connections come from the `redis` crate.

mod consumer;
mod events;
#[macro_use]
mod holds;
mod pubsub;
mod queue;
mod rates;
mod recovery;
mod registry;
mod replies;
mod slots;
mod stalls;
#[cfg(any(test, feature = "test-util"))]
pub mod testing;

use std::sync::Arc;

use async_trait::async_trait;
use futures::StreamExt;
use redis::aio::{ConnectionManager, MultiplexedConnection};
use tokio::sync::{broadcast, mpsc};

use self::holds::Current;
use self::pubsub::{Heard, Target};
use self::queue::{NewJob, Retention, Scripts, Taken};
use super::naming::{
    TokenSpace, bull_key, control_channel, decision_relay_channel, decisions_queue,
    effective_prefix, heartbeat_channel, is_instance_char, reply_owner_key, reply_queue,
    reply_queue_owner, results_queue, routing_token, run_reply_channel, run_request_queue,
    start_run_queue, step_events_queue, task_job_id, tasks_queue, tenant_events_channel,
    tenant_events_pattern,
};
use super::{
    ControlChannel, EventDelivery, Partitions, RemoteTurns, RunRequests, StepQueues, Subscription,
    TaskSubscription, TenantEvents, Transport, TransportError, TransportResult, TurnTask,
    WorkerRegistry,
};
use crate::model::{
    ControlMessage, Heartbeat, Millis, Namespace, Receipt, RemoteTask, RunReply, Scope, Settle,
    StepResult, TenantEvent, WorkerDescriptor, WorkerGroup,
};

/// A Redis call that failed, counted in the transport's error metric.
fn unavailable(message: String) -> TransportError {
    crate::metrics::transport_error("redis");
    TransportError::Unavailable(message)
}

/// Tenant events a local subscriber may fall behind by before it is told it lagged.
const LOCAL_EVENTS: usize = 4096;

/// Where and how to reach Redis.
#[derive(Clone, Debug)]
pub struct RedisConfig {
    /// `redis://[user:password@]host:port[/db]`.
    pub url: String,
    /// The wire prefix (`durable` unless every process of the cluster agrees on another).
    pub prefix: String,
    /// The process's namespace: `None` or `default` keeps the bare prefix ("default is bare").
    pub namespace: Option<Namespace>,
}

impl RedisConfig {
    /// The default prefix on `url`, with no namespace.
    pub fn new(url: impl Into<String>) -> Self {
        RedisConfig {
            url: url.into(),
            prefix: super::naming::DEFAULT_PREFIX.to_owned(),
            namespace: None,
        }
    }
}

/// What every consumer, listener and announcement of one transport shares.
struct Shared {
    client: redis::Client,
    /// For ordinary commands (reconnects on its own).
    conn: ConnectionManager,
    /// The effective prefix `P`.
    p: String,
    /// How routing tokens are spelled under `P`.
    tokens: TokenSpace,
    /// This process on the wire (`rs-<host>-<pid>-<uuid>`).
    instance: String,
    /// This process's own results queue, named in the tasks it sends, once it consumes
    /// results (see [`replies`]).
    reply_queue: std::sync::OnceLock<String>,
    scripts: Scripts,
    /// The rate allowance script ([`rates`]).
    rate_script: redis::Script,
    /// The concurrency slot scripts ([`slots`]).
    slot_scripts: slots::SlotScripts,
    /// This transport's tenant events, for its own subscribers: they get them at once, not
    /// after a trip through Redis (whose echo they skip).
    local_events: broadcast::Sender<TenantEvent>,
    started_at: Millis,
    /// The live workers' descriptors, for the dispatch guard.
    directory: registry::Directory,
    /// What this process took and has not settled ([`holds`]).
    holds: holds::Holds,
}

impl Shared {
    /// Every key matching `pattern`, read with `SCAN … COUNT 100` (never `KEYS`, wire §1.3).
    async fn scan(&self, pattern: &str) -> redis::RedisResult<Vec<String>> {
        let mut conn = self.conn.clone();
        let mut keys = Vec::new();
        let mut cursor: u64 = 0;
        loop {
            let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(pattern)
                .arg("COUNT")
                .arg(100)
                .query_async(&mut conn)
                .await?;
            keys.extend(batch);
            if next == 0 {
                return Ok(keys);
            }
            cursor = next;
        }
    }

    /// A connection for blocking commands that wait up to `block`: its own, with a response
    /// timeout longer than that wait (the default one would cut a `BZPOPMIN` short), so a
    /// connection that died without a reset (a dropped route, an idle timeout on the way) is
    /// noticed and replaced instead of waited on forever.
    async fn blocking_connection(
        &self,
        block: std::time::Duration,
    ) -> redis::RedisResult<MultiplexedConnection> {
        let timeout = block + std::time::Duration::from_secs(5);
        let config = redis::AsyncConnectionConfig::new().set_response_timeout(Some(timeout));
        self.client
            .get_multiplexed_async_connection_with_config(&config)
            .await
    }
}

/// The aviary wire over Redis. Cheap to clone.
#[derive(Clone)]
pub struct RedisTransport {
    shared: Arc<Shared>,
}

fn now_ms() -> Millis {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as Millis)
}

impl RedisTransport {
    /// Connects and checks the server answers; fails fast with a message naming the URL (its
    /// password left out) when it does not.
    pub async fn connect(config: RedisConfig) -> TransportResult<Self> {
        let unanswered = |e: redis::RedisError| {
            unavailable(format!(
                "Redis at {} does not answer ({e}); start it or fix REDIS_URL",
                crate::url::redact(&config.url)
            ))
        };
        let client = redis::Client::open(config.url.as_str()).map_err(|e| {
            unavailable(format!(
                "REDIS_URL `{}` is not a Redis URL ({e}); use redis://HOST:PORT",
                crate::url::redact(&config.url)
            ))
        })?;
        let mut conn = ConnectionManager::new(client.clone())
            .await
            .map_err(unanswered)?;
        let _: String = redis::cmd("PING")
            .query_async(&mut conn)
            .await
            .map_err(unanswered)?;
        // Only characters an instance id may carry, so its results queue is one workers accept.
        let host: String = std::env::var("HOSTNAME")
            .unwrap_or_else(|_| "host".into())
            .chars()
            .map(|c| if is_instance_char(c) { c } else { '-' })
            .collect();
        let p = effective_prefix(&config.prefix, config.namespace.as_ref());
        let instance = format!(
            "rs-{host}-{}-{}",
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        );
        Ok(RedisTransport {
            shared: Arc::new(Shared {
                client,
                conn,
                holds: holds::Holds::new(&p, &instance),
                p,
                tokens: TokenSpace::new(config.namespace.as_ref()),
                instance,
                rate_script: rates::script(),
                slot_scripts: slots::SlotScripts::default(),
                scripts: Scripts::default(),
                reply_queue: std::sync::OnceLock::new(),
                local_events: broadcast::channel(LOCAL_EVENTS).0,
                started_at: now_ms(),
                directory: registry::Directory::default(),
            }),
        })
    }

    /// The effective prefix every name of this transport starts with.
    pub fn prefix(&self) -> &str {
        &self.shared.p
    }

    /// `token` as this transport's wire spells it (see [`TokenSpace`]).
    fn wire_token(&self, token: &str) -> TransportResult<String> {
        self.shared
            .tokens
            .to_wire(token)
            .map(str::to_owned)
            .map_err(TransportError::Unsupported)
    }

    /// This process's instance id on the wire.
    pub fn instance_id(&self) -> &str {
        &self.shared.instance
    }

    async fn add(
        &self,
        queue: &str,
        name: &str,
        data: String,
        retention: Retention,
    ) -> TransportResult<()> {
        self.add_unless_gone(queue, None, name, data, retention)
            .await
    }

    /// [`RedisTransport::add`] to a consumer's own queue, or to `unless_gone.1` while its
    /// liveness key `unless_gone.0` is missing.
    async fn add_unless_gone(
        &self,
        queue: &str,
        unless_gone: Option<(&str, &str)>,
        name: &str,
        data: String,
        retention: Retention,
    ) -> TransportResult<()> {
        self.add_job(NewJob {
            queue,
            unless_gone,
            name,
            data: &data,
            retention,
            priority: None,
            job_id: None,
        })
        .await
    }

    async fn add_job(&self, job: NewJob<'_>) -> TransportResult<()> {
        let (queue, name) = (job.queue, job.name);
        let mut conn = self.shared.conn.clone();
        self.shared
            .scripts
            .add(&mut conn, &job)
            .await
            .map(|_| ())
            .map_err(|e| unavailable(format!("adding a `{name}` job to {queue}: {e}")))
    }

    async fn publish(&self, channel: &str, payload: String) -> TransportResult<()> {
        let mut conn = self.shared.conn.clone();
        redis::cmd("PUBLISH")
            .arg(channel)
            .arg(payload)
            .query_async::<i64>(&mut conn)
            .await
            .map(|_| ())
            .map_err(|e| unavailable(format!("publishing on {channel}: {e}")))
    }

    /// Consumes `queues` and parses each job's data as `T`; a job that does not parse is logged
    /// and dropped, never stalling the queue.
    fn consume<T: serde::de::DeserializeOwned + Send + 'static>(
        &self,
        queues: Vec<String>,
        what: &'static str,
    ) -> (Subscription<T>, mpsc::Sender<()>) {
        let (items, alive) = self.consume_held::<T>(queues, what, Hold::No);
        (Box::pin(items.map(|(item, _)| item)), alive)
    }

    /// Consumes `queue`'s job data raw, so that a malformed message still reaches the responder
    /// (which answers it, or logs it and goes on).
    fn consume_raw(&self, queue: String) -> Subscription<String> {
        let (tx, rx) = consumer::channel();
        consumer::spawn(self.shared.clone(), vec![queue], tx, false);
        Box::pin(futures::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|taken| (taken.data, rx))
        }))
    }

    /// [`RedisTransport::consume`], each job held until its receipt settles it as `hold` says
    /// (see [`holds`]); a job that does not parse is settled at once.
    fn consume_held<T: serde::de::DeserializeOwned + Send + 'static>(
        &self,
        queues: Vec<String>,
        what: &'static str,
        hold: Hold,
    ) -> (Subscription<(T, Receipt)>, mpsc::Sender<()>) {
        let (tx, rx) = consumer::channel();
        consumer::spawn(self.shared.clone(), queues, tx, hold != Hold::No);
        Self::parse(self.shared.clone(), rx, what, hold)
    }

    /// The jobs on `rx` parsed as `T`, with their receipts if they are held; a job that does not
    /// parse is logged and dropped. Held jobs the stream never yields go back when it drops;
    /// with [`Hold::Checked`], a job whose take is no longer current is skipped.
    fn parse<T: serde::de::DeserializeOwned + Send + 'static>(
        shared: Arc<Shared>,
        rx: mpsc::Receiver<Taken>,
        what: &'static str,
        hold: Hold,
    ) -> (Subscription<(T, Receipt)>, mpsc::Sender<()>) {
        // Closed when the returned stream is dropped: ends the announcements tied to it.
        let (alive, gone) = mpsc::channel::<()>(1);
        let inbox = Inbox { rx, shared, hold };
        let stream = futures::stream::unfold((inbox, gone), move |(mut inbox, gone)| async move {
            loop {
                let taken = inbox.rx.recv().await?;
                let unsure = taken.suspect() || !inbox.shared.holds.continuous_since(taken.epoch);
                if let Some(receipt) = inbox.receipt(taken.job, taken.take, unsure).await {
                    match serde_json::from_str::<T>(&taken.data) {
                        Ok(item) => return Some(((item, receipt), (inbox, gone))),
                        Err(e) => {
                            tracing::warn!(error = %e, what, "dropped a malformed job");
                        }
                    }
                }
            }
        });
        (Box::pin(stream), alive)
    }

    /// Consumes the queues of `names` on the subscription's partitions, each job held until its
    /// receipt settles it, and announces this worker on each of their tokens while the stream
    /// lives.
    fn consume_announced<T: serde::de::DeserializeOwned + Send + 'static>(
        &self,
        subscription: TaskSubscription,
        names: &[String],
        what: &'static str,
    ) -> TransportResult<Subscription<(T, Receipt)>> {
        let Partitions::Only(partitions) = &subscription.partitions else {
            return Err(TransportError::Unsupported(
                "a shared Redis broker serves named partitions only: give the worker its tenant \
                 (`durable worker --tenant NAME`)"
                    .into(),
            ));
        };
        let tokens = partitions
            .iter()
            .flat_map(|p| names.iter().map(move |name| routing_token(name, Some(p))))
            .map(|token| self.wire_token(&token))
            .collect::<TransportResult<Vec<String>>>()?;
        let queues = tokens
            .iter()
            .map(|t| tasks_queue(&self.shared.p, t))
            .collect();
        let (items, alive) = self.consume_held::<T>(queues, what, Hold::Checked);
        let mut descriptor = subscription.descriptor(&self.shared.instance, self.shared.started_at);
        // Under a namespace, as the SDK workers describe themselves: the namespace named, its
        // own partition left out as in the tokens.
        if let Some(ns) = self.shared.tokens.namespace() {
            if descriptor.partition.as_deref() == Some(ns.as_str()) {
                descriptor.partition = None;
            }
            descriptor.namespace = Some(ns.to_string());
        }
        registry::announce(
            self.shared.clone(),
            tokens,
            descriptor,
            subscription.concurrency,
            alive,
        );
        Ok(items)
    }

    /// Listens on `channel` and parses each message as `T`, skipping what does not parse
    /// (other SDKs' kinds we do not use).
    async fn listen_json<T: serde::de::DeserializeOwned + Send + 'static>(
        &self,
        channel: String,
    ) -> TransportResult<Subscription<T>> {
        let rx = self.listen(Target::Channel(channel)).await?;
        Ok(Box::pin(futures::stream::unfold(rx, |mut rx| async move {
            loop {
                if let Heard::Message(raw) = rx.recv().await?
                    && let Ok(item) = serde_json::from_str::<T>(&raw)
                {
                    return Some((item, rx));
                }
            }
        })))
    }

    async fn listen(&self, target: Target) -> TransportResult<mpsc::Receiver<Heard>> {
        pubsub::listen(self.shared.clone(), target)
            .await
            .map_err(|e| unavailable(format!("subscribing on Redis: {e}")))
    }
}

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
    /// settling: no copy of the task starts after its result exists (see [`holds`]).
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

    /// This control plane's own results queue and the shared one (see [`replies`]). Tasks
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

/// How a consumer holds what it takes (see [`holds`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Hold {
    /// Deleted as taken.
    No,
    /// Held until settled, done unless given back: a control plane's results.
    Yes,
    /// Held until settled, given back unless answered, and handed on only while the take is
    /// still current: a worker's tasks and turns (it runs no copy of a job that went back
    /// while it was thought gone).
    Checked,
}

/// A consumer's channel, as the stream that parses it holds it: once the stream is dropped,
/// the held jobs it never yielded go back to their queues.
struct Inbox {
    rx: mpsc::Receiver<Taken>,
    shared: Arc<Shared>,
    hold: Hold,
}

impl Inbox {
    /// The receipt of a taken job, or `None` for a checked one that must not run: its take is
    /// no longer current (the job went back), or a stale copy finished the job (it is settled
    /// as done). Checked only when `unsure` (see [`holds`]). The receipt exists before the
    /// check, so a stream dropped during it gives the job back.
    async fn receipt(&self, job: String, take: String, unsure: bool) -> Option<Receipt> {
        let receipt = match self.hold {
            Hold::No => return Some(Receipt::default()),
            // A result is done once the control plane is through with it, whatever became of
            // it (applied twice, it changes nothing).
            Hold::Yes => return Some(self.shared.holds.receipt(job, take, Settle::Done)),
            // A task or turn goes back unless it was answered.
            Hold::Checked => self.shared.holds.receipt(job, take, Settle::GiveBack),
        };
        let Some((job, take)) = receipt.taken().filter(|_| unsure) else {
            return Some(receipt);
        };
        let mut conn = self.shared.conn.clone();
        match self.shared.holds.still_held(&mut conn, job, take).await {
            Ok(Current::Yes) => Some(receipt),
            Ok(Current::Done) => {
                tracing::info!(
                    job,
                    "skipped a job a copy taken before this process was thought gone already finished"
                );
                receipt.done();
                None
            }
            Ok(Current::No) => {
                tracing::info!(
                    job,
                    "skipped a job that went back while this process was thought gone"
                );
                receipt.settled();
                None
            }
            // Run it: a copy running twice is what at-least-once allows, a job lost is not.
            Err(e) => {
                tracing::debug!(error = %e, job, "could not check a held job; running it");
                Some(receipt)
            }
        }
    }
}

impl Drop for Inbox {
    fn drop(&mut self) {
        if self.hold == Hold::No {
            return;
        }
        self.rx.close();
        let mut left = Vec::new();
        while let Ok(taken) = self.rx.try_recv() {
            left.push((taken.job, taken.take));
        }
        self.shared.holds.give_back(left);
    }
}

/// SDK workers on the broker (Python's `durable-worker`, or ours) run workflow turns.
impl Transport for RedisTransport {
    fn remote_turns(&self) -> Option<&dyn RemoteTurns> {
        Some(self)
    }
}

#[async_trait]
impl RemoteTurns for RedisTransport {
    async fn consume_turns(
        &self,
        subscription: TaskSubscription,
    ) -> TransportResult<Subscription<TurnTask>> {
        let names = subscription.workflow_names();
        let tokens = self.shared.tokens.clone();
        let turns = self.consume_announced::<serde_json::Value>(subscription, &names, "turn")?;
        Ok(Box::pin(turns.map(move |(mut task, receipt)| {
            if let Some(serde_json::Value::String(group)) = task.get_mut("group") {
                tokens.from_wire(group);
            }
            TurnTask { task, receipt }
        })))
    }

    async fn publish_decision(&self, decision: serde_json::Value) -> TransportResult<()> {
        self.add(
            &decisions_queue(&self.shared.p),
            "decision",
            decision.to_string(),
            Retention::Message,
        )
        .await
    }

    async fn dispatch_turn(&self, mut task: serde_json::Value) -> TransportResult<()> {
        let group = task
            .get("group")
            .and_then(serde_json::Value::as_str)
            .ok_or_else(|| {
                TransportError::Unsupported("a workflow task needs its `group`".into())
            })?;
        let group = self.wire_token(group)?;
        let queue = tasks_queue(&self.shared.p, &group);
        task["group"] = group.into();
        self.add(&queue, "workflow", task.to_string(), Retention::Message)
            .await
    }

    async fn consume_decisions(&self) -> TransportResult<Subscription<serde_json::Value>> {
        let (decisions, _alive) =
            self.consume::<serde_json::Value>(vec![decisions_queue(&self.shared.p)], "decision");
        Ok(decisions)
    }

    async fn relay_decision(&self, decision: serde_json::Value) -> TransportResult<()> {
        self.publish(
            &decision_relay_channel(&self.shared.p),
            decision.to_string(),
        )
        .await
    }

    async fn subscribe_relayed_decisions(
        &self,
    ) -> TransportResult<Subscription<serde_json::Value>> {
        self.listen_json(decision_relay_channel(&self.shared.p))
            .await
    }

    async fn consume_step_events(&self) -> TransportResult<Subscription<serde_json::Value>> {
        let (events, _alive) = self
            .consume::<serde_json::Value>(vec![step_events_queue(&self.shared.p)], "step event");
        Ok(events)
    }
}

#[async_trait]
impl TenantEvents for RedisTransport {
    async fn publish_event(&self, event: TenantEvent) -> TransportResult<()> {
        self.publish_events(vec![event]).await
    }

    async fn publish_events(&self, batch: Vec<TenantEvent>) -> TransportResult<()> {
        let count = batch.len();
        let mut pipe = redis::pipe();
        for event in batch {
            // The wire publishes only non-default namespaces; we publish `default` too, on its
            // own channel, so a dashboard on another process sees a standalone tenant's events.
            let channel = tenant_events_channel(&self.shared.p, &event.namespace);
            let wire = events::to_wire(&event, &self.shared.instance);
            pipe.cmd("PUBLISH").arg(channel).arg(wire).ignore();
            // Nobody listening here is fine: the event still goes to the other processes.
            let _ = self.shared.local_events.send(event);
        }
        let mut conn = self.shared.conn.clone();
        pipe.query_async::<()>(&mut conn)
            .await
            .map_err(|e| unavailable(format!("publishing {count} tenant events: {e}")))
    }

    async fn subscribe_events(&self, scope: Scope) -> TransportResult<Subscription<EventDelivery>> {
        let target = match scope.namespace() {
            Some(ns) => Target::Channel(tenant_events_channel(&self.shared.p, ns)),
            None => Target::Pattern(tenant_events_pattern(&self.shared.p)),
        };
        // Local first, so that nothing published once this returns is missed either way.
        let local = self.shared.local_events.subscribe();
        let rx = self.listen(target).await?;
        let me = self.shared.instance.clone();
        let remote =
            futures::stream::unfold((rx, scope.clone(), me), |(mut rx, scope, me)| async move {
                loop {
                    match rx.recv().await? {
                        Heard::Gap => return Some((EventDelivery::Lagged(0), (rx, scope, me))),
                        Heard::Message(raw) => match events::from_wire(&raw, &me) {
                            // The channel is the tenant's; the check is for the pattern's sake.
                            Some(event) if scope.admits(&event.namespace) => {
                                return Some((EventDelivery::Event(event), (rx, scope, me)));
                            }
                            _ => continue,
                        },
                    }
                }
            });
        let local = futures::stream::unfold((local, scope), |(mut local, scope)| async move {
            loop {
                let delivery = match local.recv().await {
                    Ok(event) if scope.admits(&event.namespace) => EventDelivery::Event(event),
                    Ok(_) => continue,
                    Err(broadcast::error::RecvError::Lagged(n)) => EventDelivery::Lagged(n),
                    Err(broadcast::error::RecvError::Closed) => return None,
                };
                return Some((delivery, (local, scope)));
            }
        });
        Ok(Box::pin(futures::stream::select(local, remote)))
    }
}

#[async_trait]
impl ControlChannel for RedisTransport {
    async fn publish_control(&self, mut message: ControlMessage) -> TransportResult<()> {
        message
            .from
            .get_or_insert_with(|| self.shared.instance.clone());
        let payload = serde_json::to_string(&message)
            .map_err(|e| unavailable(format!("encoding a control message: {e}")))?;
        self.publish(&control_channel(&self.shared.p), payload)
            .await
    }

    async fn subscribe_control(&self) -> TransportResult<Subscription<ControlMessage>> {
        self.listen_json(control_channel(&self.shared.p)).await
    }
}

#[async_trait]
impl WorkerRegistry for RedisTransport {
    async fn worker_groups(&self, scope: &Scope) -> TransportResult<Vec<WorkerGroup>> {
        registry::groups(&self.shared, scope)
            .await
            .map_err(|e| unavailable(format!("reading worker registrations: {e}")))
    }

    async fn worker_descriptors(&self, token: &str) -> TransportResult<Vec<WorkerDescriptor>> {
        registry::Directory::descriptors(&self.shared, token)
            .await
            .map_err(|e| unavailable(format!("reading worker descriptors: {e}")))
    }

    async fn publish_heartbeat(&self, mut beat: Heartbeat) -> TransportResult<()> {
        self.shared
            .tokens
            .into_wire(&mut beat.group)
            .map_err(TransportError::Unsupported)?;
        let payload = serde_json::to_string(&beat)
            .map_err(|e| unavailable(format!("encoding a heartbeat: {e}")))?;
        self.publish(&heartbeat_channel(&self.shared.p), payload)
            .await
    }

    async fn subscribe_heartbeats(&self) -> TransportResult<Subscription<Heartbeat>> {
        let tokens = self.shared.tokens.clone();
        let beats = self
            .listen_json::<Heartbeat>(heartbeat_channel(&self.shared.p))
            .await?;
        Ok(Box::pin(beats.map(move |mut beat| {
            tokens.from_wire(&mut beat.group);
            beat
        })))
    }
}

#[async_trait]
impl RunRequests for RedisTransport {
    async fn send_run_request(&self, request: String) -> TransportResult<()> {
        self.add(
            &run_request_queue(&self.shared.p),
            "runRequest",
            request,
            Retention::Message,
        )
        .await
    }

    async fn consume_run_requests(&self) -> TransportResult<Subscription<String>> {
        Ok(self.consume_raw(run_request_queue(&self.shared.p)))
    }

    async fn send_start_run(&self, message: String) -> TransportResult<()> {
        self.add(
            &start_run_queue(&self.shared.p),
            "startRun",
            message,
            Retention::Message,
        )
        .await
    }

    async fn consume_start_runs(&self) -> TransportResult<Subscription<String>> {
        Ok(self.consume_raw(start_run_queue(&self.shared.p)))
    }

    async fn publish_run_reply(&self, reply: RunReply) -> TransportResult<()> {
        let payload = serde_json::to_string(&reply)
            .map_err(|e| unavailable(format!("encoding a run reply: {e}")))?;
        self.publish(&run_reply_channel(&self.shared.p), payload)
            .await
    }

    async fn subscribe_run_replies(&self) -> TransportResult<Subscription<RunReply>> {
        self.listen_json(run_reply_channel(&self.shared.p)).await
    }
}
