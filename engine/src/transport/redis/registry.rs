//! The worker registry on Redis (aviary wire §6): a consuming process announces itself per token
//! with a liveness key and a descriptor key (TTL 35 s, refreshed every 10 s), and anyone can
//! list the live worker groups by scanning the liveness keys.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use redis::AsyncCommands;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::Shared;
use crate::model::{Millis, Scope, WorkerDescriptor, WorkerGroup};
use crate::transport::naming::{
    parse_worker_heartbeat_key, split_token, worker_descriptor_key, worker_heartbeat_key,
    worker_heartbeat_pattern,
};

/// How long an announcement lives without a refresh.
const TTL_SECS: u64 = 35;
/// How often it is refreshed.
const EVERY: Duration = Duration::from_secs(10);

/// Announces `descriptor` on every token of `tokens` until `alive` is closed (the consumer's
/// receiver was dropped), then withdraws it so dashboards stop counting this worker at once.
pub(super) fn announce<T: Send + 'static>(
    shared: Arc<Shared>,
    tokens: Vec<String>,
    descriptor: WorkerDescriptor,
    concurrency: usize,
    alive: mpsc::Sender<T>,
) {
    tokio::spawn(async move {
        let hash = descriptor.hash();
        let body = match serde_json::to_string(&descriptor) {
            Ok(body) => body,
            Err(e) => {
                tracing::error!(error = %e, "cannot serialize the worker descriptor");
                return;
            }
        };
        let mut conn = shared.conn.clone();
        loop {
            let beat = json!({
                "ts": super::now_ms(),
                "status": { "runtime": "rust", "concurrency": { "mode": "fixed", "limit": concurrency } },
                "descriptorHash": hash,
            })
            .to_string();
            for token in &tokens {
                let written: redis::RedisResult<()> = redis::pipe()
                    .set_ex(
                        worker_heartbeat_key(&shared.p, token, &descriptor.instance_id),
                        &beat,
                        TTL_SECS,
                    )
                    .set_ex(
                        worker_descriptor_key(&shared.p, token, &descriptor.instance_id),
                        &body,
                        TTL_SECS,
                    )
                    .query_async(&mut conn)
                    .await;
                if let Err(e) = written {
                    tracing::warn!(error = %e, token, "announcing this worker failed; retrying next beat");
                }
            }
            tokio::select! {
                () = alive.closed() => break,
                () = tokio::time::sleep(EVERY) => {}
            }
        }
        let keys: Vec<String> = tokens
            .iter()
            .flat_map(|t| {
                [
                    worker_heartbeat_key(&shared.p, t, &descriptor.instance_id),
                    worker_descriptor_key(&shared.p, t, &descriptor.instance_id),
                ]
            })
            .collect();
        let removed: redis::RedisResult<()> = conn.del(keys).await;
        if let Err(e) = removed {
            tracing::debug!(error = %e, "withdrawing this worker's announcement failed; it expires on its own");
        }
    });
}

/// When a liveness value says its writer was last seen: `{"ts": ms, …}` or a bare number
/// (below 1e12 it is seconds, wire §6.2).
fn seen_at(value: &str) -> Option<Millis> {
    let parsed: Value = serde_json::from_str(value).ok()?;
    let ts = match &parsed {
        Value::Object(o) => o.get("ts")?.as_f64()?,
        Value::Number(n) => n.as_f64()?,
        _ => return None,
    };
    Some(if ts < 1e12 { ts * 1000.0 } else { ts } as Millis)
}

/// The live worker groups whose partition `scope` admits, one per token, counting instances.
pub(super) async fn groups(shared: &Shared, scope: &Scope) -> redis::RedisResult<Vec<WorkerGroup>> {
    let mut conn = shared.conn.clone();
    let mut keys: Vec<String> = Vec::new();
    let mut cursor: u64 = 0;
    loop {
        let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(worker_heartbeat_pattern(&shared.p))
            .arg("COUNT")
            .arg(100)
            .query_async(&mut conn)
            .await?;
        keys.extend(batch);
        if next == 0 {
            break;
        }
        cursor = next;
    }
    let mut by_token: BTreeMap<String, WorkerGroup> = BTreeMap::new();
    for chunk in keys.chunks(200) {
        let values: Vec<Option<String>> =
            redis::cmd("MGET").arg(chunk).query_async(&mut conn).await?;
        for (key, value) in chunk.iter().zip(values) {
            let (Some((token, _instance)), Some(value)) =
                (parse_worker_heartbeat_key(&shared.p, key), value)
            else {
                continue;
            };
            let (name, partition) = split_token(token);
            if !scope.admits(&partition) {
                continue;
            }
            let seen = seen_at(&value);
            let group = by_token
                .entry(token.to_owned())
                .or_insert_with(|| WorkerGroup {
                    name: name.to_owned(),
                    partition: Some(partition),
                    workers: 0,
                    last_seen: None,
                });
            group.workers += 1;
            group.last_seen = group.last_seen.max(seen);
        }
    }
    Ok(by_token.into_values().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn liveness_values_in_every_form() {
        assert_eq!(
            seen_at(r#"{"ts":1795939520882,"status":{}}"#),
            Some(1_795_939_520_882)
        );
        assert_eq!(seen_at("1795939520"), Some(1_795_939_520_000));
        assert_eq!(seen_at(r#"{"ts":1795939520}"#), Some(1_795_939_520_000));
        assert_eq!(seen_at("up"), None);
    }
}
