//! What a Redis transport takes: jobs consumed off queues ([`super::consumer`]), parsed, and
//! held until their receipts settle them ([`super::holds`]).

use std::sync::Arc;

use futures::StreamExt;
use tokio::sync::mpsc;

use super::holds::Current;
use super::queue::Taken;
use super::shared_pools::{self, Fair};
use super::{RedisTransport, Shared, consumer, registry};
use crate::model::{PoolName, Receipt, Settle};
use crate::transport::naming::{partition_token, tasks_queue};
use crate::transport::{
    Partitions, Subscription, TaskSubscription, TransportError, TransportResult,
};

/// How a consumer holds what it takes (see [`super::holds`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Hold {
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
pub(super) struct Inbox {
    rx: mpsc::Receiver<Taken>,
    shared: Arc<Shared>,
    hold: Hold,
}

impl Inbox {
    /// The receipt of a taken job, or `None` for a checked one that must not run: its take is
    /// no longer current (the job went back), or a stale copy finished the job (it is settled
    /// as done). Checked only when `unsure` (see [`super::holds`]). The receipt exists before the
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

impl RedisTransport {
    /// Consumes `queues` and parses each job's data as `T`; a job that does not parse is logged
    /// and dropped, never stalling the queue.
    pub(super) fn consume<T: serde::de::DeserializeOwned + Send + 'static>(
        &self,
        queues: Vec<String>,
        what: &'static str,
    ) -> (Subscription<T>, mpsc::Sender<()>) {
        let (items, alive) = self.consume_held::<T>(queues, what, Hold::No);
        (Box::pin(items.map(|(item, _)| item)), alive)
    }

    /// Consumes `queue`'s job data raw, so that a malformed message still reaches the responder
    /// (which answers it, or logs it and goes on).
    pub(super) fn consume_raw(&self, queue: String) -> Subscription<String> {
        let (tx, rx) = consumer::channel();
        consumer::spawn(self.shared.clone(), vec![queue], tx, false);
        Box::pin(futures::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|taken| (taken.data, rx))
        }))
    }

    /// [`RedisTransport::consume`], each job held until its receipt settles it as `hold` says
    /// (see [`super::holds`]); a job that does not parse is settled at once.
    pub(super) fn consume_held<T: serde::de::DeserializeOwned + Send + 'static>(
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
    pub(super) fn parse<T: serde::de::DeserializeOwned + Send + 'static>(
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
    pub(super) fn consume_announced<T: serde::de::DeserializeOwned + Send + 'static>(
        &self,
        subscription: TaskSubscription,
        names: &[String],
        what: &'static str,
    ) -> TransportResult<Subscription<(T, Receipt)>> {
        let partitions = match &subscription.partitions {
            Partitions::Only(partitions) => partitions,
            Partitions::Shared(pool) => {
                return self.consume_shared(subscription.clone(), pool.clone(), names, what);
            }
            Partitions::All => {
                return Err(TransportError::Unsupported(
                    "a shared Redis broker serves named partitions only: give the worker its \
                     tenant (`durable worker --tenant NAME`), or a shared pool \
                     (`durable worker --pool NAME`)"
                        .into(),
                ));
            }
        };
        let tokens = partitions
            .iter()
            .flat_map(|p| names.iter().map(move |name| partition_token(name, p)))
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
            tokio::sync::watch::channel(tokens).1,
            descriptor,
            subscription.concurrency,
            alive,
        );
        Ok(items)
    }

    /// [`RedisTransport::consume_announced`] for shared pool `pool`: the queues of every tenant
    /// it is granted to, taken from fairly, one job at a time (see [`super::shared_pools`]).
    fn consume_shared<T: serde::de::DeserializeOwned + Send + 'static>(
        &self,
        subscription: TaskSubscription,
        pool: PoolName,
        names: &[String],
        what: &'static str,
    ) -> TransportResult<Subscription<(T, Receipt)>> {
        if self.shared.tokens.namespace().is_some() {
            return Err(TransportError::Unsupported(format!(
                "shared pool `{pool}` serves several tenants, and a namespaced transport reaches one: start its worker without --namespace"
            )));
        }
        let (lanes_tx, lanes_rx) = tokio::sync::watch::channel(Vec::new());
        let (tokens_tx, tokens_rx) = tokio::sync::watch::channel(Vec::new());
        // One job waits taken at a time: the next take is the fair order's of that moment.
        let (tx, rx) = mpsc::channel(1);
        consumer::spawn_in(self.shared.clone(), Fair::new(lanes_rx), tx, true);
        let (items, alive) = Self::parse::<T>(self.shared.clone(), rx, what, Hold::Checked);
        shared_pools::watch_grants(
            self.shared.clone(),
            pool,
            names.to_vec(),
            lanes_tx,
            tokens_tx,
            alive.clone(),
        );
        let descriptor = subscription.descriptor(&self.shared.instance, self.shared.started_at);
        registry::announce(
            self.shared.clone(),
            tokens_rx,
            descriptor,
            subscription.concurrency,
            alive,
        );
        Ok(items)
    }
}
