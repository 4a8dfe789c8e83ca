//! Listening on pub/sub channels with a connection of its own, re-subscribing after a broken
//! connection and saying so (messages published meanwhile are gone: listeners should re-read).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::mpsc;

use super::{RedisTransport, Shared, unavailable};
use crate::transport::{Subscription, TransportResult};

/// What a listener hears.
#[derive(Debug)]
pub(super) enum Heard {
    /// A message's payload.
    Message(String),
    /// The connection broke and was re-established: anything published meanwhile was missed.
    Gap,
}

/// A channel name, or a glob pattern of them.
#[derive(Clone, Debug)]
pub(super) enum Target {
    Channel(String),
    Pattern(String),
}

async fn subscribe(shared: &Shared, target: &Target) -> redis::RedisResult<redis::aio::PubSub> {
    let mut pubsub = shared.client.get_async_pubsub().await?;
    match target {
        Target::Channel(c) => pubsub.subscribe(c).await?,
        Target::Pattern(p) => pubsub.psubscribe(p).await?,
    }
    Ok(pubsub)
}

/// Listens on `target` until the receiver is dropped. Returns once the subscription is in
/// place, so nothing published after this returns is missed.
pub(super) async fn listen(
    shared: Arc<Shared>,
    target: Target,
) -> redis::RedisResult<mpsc::Receiver<Heard>> {
    let mut pubsub = subscribe(&shared, &target).await?;
    let (tx, rx) = mpsc::channel(1024);
    tokio::spawn(async move {
        let mut backoff = Duration::from_millis(100);
        loop {
            let mut messages = pubsub.into_on_message();
            loop {
                tokio::select! {
                    msg = messages.next() => match msg {
                        Some(msg) => {
                            let Ok(payload) = msg.get_payload::<String>() else { continue };
                            if tx.send(Heard::Message(payload)).await.is_err() {
                                return;
                            }
                        }
                        None => break,
                    },
                    () = tx.closed() => return,
                }
            }
            drop(messages);
            tracing::warn!(target = ?target, "a Redis subscription dropped; re-subscribing");
            pubsub = loop {
                if tx.is_closed() {
                    return;
                }
                match subscribe(&shared, &target).await {
                    Ok(p) => break p,
                    Err(e) => {
                        tracing::warn!(error = %e, target = ?target, "cannot re-subscribe on Redis; retrying");
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(Duration::from_secs(5));
                    }
                }
            };
            backoff = Duration::from_millis(100);
            if tx.send(Heard::Gap).await.is_err() {
                return;
            }
        }
    });
    Ok(rx)
}

impl RedisTransport {
    /// Listens on `channel` and parses each message as `T`, skipping what does not parse
    /// (other SDKs' kinds we do not use).
    pub(super) async fn listen_json<T: serde::de::DeserializeOwned + Send + 'static>(
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

    pub(super) async fn listen(&self, target: Target) -> TransportResult<mpsc::Receiver<Heard>> {
        listen(self.shared.clone(), target)
            .await
            .map_err(|e| unavailable(format!("subscribing on Redis: {e}")))
    }
}
