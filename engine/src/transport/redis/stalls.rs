//! The jobs an SDK worker (Python's `durable-worker`, Node's) was running when it died, back
//! in their queue within seconds of its liveness lapsing.
//!
//! An SDK worker holds each job it runs in BullMQ's way: the job's id in `bull:<q>:active` and a
//! lock key (`…:<id>:lock`, 30 s, extended every 15 s). When the worker dies, BullMQ's own
//! stalled check, run by the surviving workers every 30 s, needs two passes to put the job back
//! (about a minute). The worker's liveness value (wire §6.2), though, is written every 10 s: a
//! value older than [`LAPSE`], or one that vanished, says the worker is gone well before that.
//!
//! So for a token where an instance lapsed, every control plane looks at the token's active
//! jobs each round, and puts back, exactly as BullMQ's stalled check does (the stalled count
//! rises, a job stalled twice carries BullMQ's deferred failure), each job whose lock is gone
//! or 5 s overdue for renewal. When no SDK worker on the token is alive at all, a lock that has not
//! been renewed in the last few seconds is enough: nobody is left to renew it. A live worker
//! renews its locks every 15 s, so its jobs are never put back.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use redis::Script;

use super::Shared;
use super::registry::{liveness, seen_at};
use crate::transport::naming::{bull_key, tasks_queue};

/// How old a liveness value may be before its worker counts as gone (written every 10 s).
const LAPSE: Duration = Duration::from_secs(15);
/// How long after a lapse its token's active jobs are still looked at.
const WATCH: Duration = Duration::from_secs(90);
/// A lock with less left than this (of BullMQ's 30 s) missed its renewal, due 15 s in, by 5 s:
/// a live worker on a busy machine renews late, but not that late.
const OVERDUE_MS: i64 = 10_000;
/// With no live worker on the token, a lock with less left than this was not renewed in the
/// last 5 s, so it is not one a worker that just started took.
const UNRENEWED_MS: i64 = 25_000;
/// BullMQ's `maxStalledCount` (wire §1.4).
const MAX_STALLED: u32 = 1;

/// Puts a gone worker's active jobs back (see the module docs). KEYS: active, wait, paused,
/// meta, marker, events, stalled. ARGV: the job key prefix, the overdue and unrenewed
/// thresholds (ms), "1" if a worker on the token is alive, the max stalled count.
const RECOVER: &str = r#"
local prefix, overdue, unrenewed = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local anyone, max_stalled = ARGV[4] == "1", tonumber(ARGV[5])
local moved = {}
for _, id in ipairs(redis.call("LRANGE", KEYS[1], 0, -1)) do
  local job = prefix .. id
  local left = redis.call("PTTL", job .. ":lock")
  local gone = left == -2 or (left >= 0 and left < overdue)
    or (not anyone and left >= 0 and left < unrenewed)
  if gone and redis.call("EXISTS", job) == 0 then
    -- Nothing to run: only the stale entry goes.
    redis.call("LREM", KEYS[1], 1, id)
  elseif gone and redis.call("LREM", KEYS[1], 1, id) > 0 then
    redis.call("DEL", job .. ":lock")
    redis.call("SREM", KEYS[7], id)
    if redis.call("HINCRBY", job, "stc", 1) > max_stalled then
      redis.call("HSET", job, "defa", "job stalled more than allowable limit")
    end
    if redis.call("HEXISTS", KEYS[4], "paused") == 1 then
      redis.call("RPUSH", KEYS[3], id)
    else
      redis.call("RPUSH", KEYS[2], id)
      redis.call("ZADD", KEYS[5], 0, "0")
    end
    redis.call("XADD", KEYS[6], "MAXLEN", "~", 10000, "*", "event", "waiting", "jobId", id, "prev", "active")
    redis.call("XADD", KEYS[6], "MAXLEN", "~", 10000, "*", "event", "stalled", "jobId", id, "reason", "its worker stopped beating")
    moved[#moved + 1] = id
  end
end
return moved
"#;

/// What one control plane remembers between rounds: when each SDK instance was last seen
/// alive, and the tokens where one lapsed.
pub(super) struct Stalls {
    seen: Mutex<HashMap<(String, String), Instant>>,
    lapsed: Mutex<HashMap<String, Instant>>,
    script: Script,
}

impl Default for Stalls {
    fn default() -> Self {
        Stalls {
            seen: Mutex::default(),
            lapsed: Mutex::default(),
            script: Script::new(RECOVER),
        }
    }
}

/// Whether `instance` is one of ours: our consumers hold what they take in their own sets
/// (see [`super::holds`]), never in BullMQ's active lists.
fn is_ours(instance: &str) -> bool {
    instance.starts_with("rs-")
}

impl Stalls {
    /// One round: reads the liveness values, notes lapses, and puts back the gone workers'
    /// active jobs on the tokens where one lapsed. How many jobs went back.
    pub(super) async fn recover(&self, shared: &Shared) -> redis::RedisResult<usize> {
        let now_ms = super::now_ms();
        let now = Instant::now();
        // Per token: whether an SDK worker there is alive now.
        let mut alive: HashMap<String, bool> = HashMap::new();
        let mut fresh: HashMap<(String, String), Instant> = HashMap::new();
        for (token, instance, value) in liveness(shared).await? {
            if is_ours(&instance) {
                continue;
            }
            let age = seen_at(&value).map(|at| now_ms.saturating_sub(at));
            let live = age.is_some_and(|age| age <= LAPSE.as_millis() as i64);
            *alive.entry(token.clone()).or_default() |= live;
            if live {
                fresh.insert((token, instance), now);
            } else {
                lock(&self.lapsed).insert(token, now);
            }
        }
        {
            let mut seen = lock(&self.seen);
            let mut lapsed = lock(&self.lapsed);
            // An instance seen alive before and not now lapsed (stale or gone).
            for (token, _) in seen.keys().filter(|k| !fresh.contains_key(*k)) {
                lapsed.insert(token.clone(), now);
            }
            *seen = fresh;
            lapsed.retain(|_, at| now.duration_since(*at) < WATCH);
        }
        let tokens: Vec<String> = lock(&self.lapsed).keys().cloned().collect();
        let mut conn = shared.conn.clone();
        let mut total = 0;
        for token in tokens {
            let queue = tasks_queue(&shared.p, &token);
            let anyone = alive.get(&token).copied().unwrap_or(false);
            let mut invoke = self.script.prepare_invoke();
            for suffix in [
                "active", "wait", "paused", "meta", "marker", "events", "stalled",
            ] {
                invoke.key(bull_key(&queue, suffix));
            }
            let moved: Vec<String> = invoke
                .arg(bull_key(&queue, ""))
                .arg(OVERDUE_MS)
                .arg(UNRENEWED_MS)
                .arg(if anyone { "1" } else { "0" })
                .arg(MAX_STALLED)
                .invoke_async(&mut conn)
                .await?;
            if !moved.is_empty() {
                tracing::info!(token, jobs = ?moved, "put back the jobs a worker that stopped beating was running");
            }
            total += moved.len();
        }
        Ok(total)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::naming::worker_heartbeat_key;
    use crate::transport::redis::testing;

    /// Sets up, on `token`'s queue, job `id` active under a lock with `left_ms` to live (none
    /// if `None`), as an SDK worker's moveToActive leaves it.
    async fn active(shared: &Shared, token: &str, id: &str, left_ms: Option<u64>) {
        let queue = tasks_queue(&shared.p, token);
        let mut conn = shared.conn.clone();
        let job = bull_key(&queue, id);
        let mut pipe = redis::pipe();
        pipe.hset(&job, "data", "{}")
            .ignore()
            .lpush(bull_key(&queue, "active"), id)
            .ignore();
        if let Some(ms) = left_ms {
            pipe.pset_ex(format!("{job}:lock"), "py-token:1", ms)
                .ignore();
        }
        let () = pipe.query_async(&mut conn).await.expect("set up");
    }

    /// Announces SDK instance `instance` on `token`, last seen `age_ms` ago.
    async fn beat(shared: &Shared, token: &str, instance: &str, age_ms: i64) {
        let mut conn = shared.conn.clone();
        let value = format!(
            r#"{{"ts":{},"status":{{}}}}"#,
            super::super::now_ms() - age_ms
        );
        let () = redis::cmd("SET")
            .arg(worker_heartbeat_key(&shared.p, token, instance))
            .arg(value)
            .arg("EX")
            .arg(35)
            .query_async(&mut conn)
            .await
            .expect("beat");
    }

    async fn list(shared: &Shared, token: &str, which: &str) -> Vec<String> {
        let mut conn = shared.conn.clone();
        let key = bull_key(&tasks_queue(&shared.p, token), which);
        let mut ids: Vec<String> = redis::cmd("LRANGE")
            .arg(key)
            .arg(0)
            .arg(-1)
            .query_async(&mut conn)
            .await
            .expect("lrange");
        ids.sort();
        ids
    }

    /// With a live worker beside the one that lapsed, only the jobs whose locks missed their
    /// renewal go back: the live worker's are left running. Each goes back once, as itself,
    /// with its stalled count raised; a second stall carries BullMQ's deferred failure.
    #[tokio::test]
    async fn a_lapsed_workers_jobs_go_back_and_a_live_ones_stay() {
        let Some(transport) = testing::fresh_transport().await else {
            return;
        };
        let shared = &transport.shared;
        let token = "charge@acme";
        beat(shared, token, "py-live-1", 1_000).await;
        beat(shared, token, "py-dead-2", 20_000).await;
        active(shared, token, "1", Some(20_000)).await;
        active(shared, token, "2", Some(5_000)).await;
        active(shared, token, "3", None).await;
        let stalls = Stalls::default();
        assert_eq!(stalls.recover(shared).await.expect("recover"), 2);
        assert_eq!(list(shared, token, "active").await, ["1"]);
        assert_eq!(list(shared, token, "wait").await, ["2", "3"]);
        assert_eq!(stalls.recover(shared).await.expect("recover"), 0, "once");
        let mut conn = shared.conn.clone();
        let job = bull_key(&tasks_queue(&shared.p, token), "2");
        let stc: u32 = redis::cmd("HGET")
            .arg(&job)
            .arg("stc")
            .query_async(&mut conn)
            .await
            .expect("stc");
        assert_eq!(stc, 1);
        // Taken again and stalled again: it now carries the deferred failure.
        let () = redis::pipe()
            .lrem(bull_key(&tasks_queue(&shared.p, token), "wait"), 1, "2")
            .ignore()
            .lpush(bull_key(&tasks_queue(&shared.p, token), "active"), "2")
            .ignore()
            .query_async(&mut conn)
            .await
            .expect("take again");
        assert_eq!(stalls.recover(shared).await.expect("recover"), 1);
        let deferred: Option<String> = redis::cmd("HGET")
            .arg(&job)
            .arg("defa")
            .query_async(&mut conn)
            .await
            .expect("defa");
        assert_eq!(
            deferred.as_deref(),
            Some("job stalled more than allowable limit")
        );
    }

    /// With no live worker left on the token, a lock not renewed in the last seconds goes back
    /// at once; one just taken (a worker whose first beat is on its way) stays. Tokens where
    /// nobody lapsed are not looked at, and our own workers' values count for nothing.
    #[tokio::test]
    async fn with_every_worker_gone_an_unrenewed_lock_is_enough() {
        let Some(transport) = testing::fresh_transport().await else {
            return;
        };
        let shared = &transport.shared;
        let (token, quiet) = ("charge@acme", "refund@acme");
        beat(shared, token, "py-dead-1", 16_000).await;
        beat(shared, token, "rs-host-1-abc", 1_000).await;
        active(shared, token, "1", Some(20_000)).await;
        active(shared, token, "2", Some(29_500)).await;
        beat(shared, quiet, "py-live-1", 1_000).await;
        active(shared, quiet, "9", Some(1_000)).await;
        let stalls = Stalls::default();
        assert_eq!(stalls.recover(shared).await.expect("recover"), 1);
        assert_eq!(list(shared, token, "wait").await, ["1"]);
        assert_eq!(list(shared, token, "active").await, ["2"]);
        assert_eq!(list(shared, quiet, "active").await, ["9"]);
    }

    /// A worker seen alive in one round and gone in the next (its key withdrawn or expired)
    /// lapsed too.
    #[tokio::test]
    async fn a_vanished_worker_lapsed() {
        let Some(transport) = testing::fresh_transport().await else {
            return;
        };
        let shared = &transport.shared;
        let token = "charge@acme";
        beat(shared, token, "py-gone-1", 1_000).await;
        active(shared, token, "1", Some(9_000)).await;
        let stalls = Stalls::default();
        assert_eq!(stalls.recover(shared).await.expect("recover"), 0);
        let mut conn = shared.conn.clone();
        let () = redis::cmd("DEL")
            .arg(worker_heartbeat_key(&shared.p, token, "py-gone-1"))
            .query_async(&mut conn)
            .await
            .expect("del");
        assert_eq!(stalls.recover(shared).await.expect("recover"), 1);
        assert_eq!(list(shared, token, "wait").await, ["1"]);
    }
}
