//! BullMQ-compatible queue operations, written from the key layout the aviary wire documents
//! (§1.4): a job is a hash `bull:<q>:<id>` (`name`, `data`, `opts`, `timestamp`, `delay`,
//! `priority`) whose id waits in `bull:<q>:wait` (or `:prioritized`), and a worker blocked on
//! `bull:<q>:marker` is woken by a marker entry. The Node and Python SDKs consume jobs added
//! here, and we consume theirs. Each operation is one Lua script, so it is atomic.

use redis::Script;
use serde_json::{Value, json};

use crate::transport::naming::bull_key;

/// Adds a job; returns its id. KEYS: the queue's id, wait, prioritized, pc, marker, meta,
/// paused and events keys; for a job that needs a live consumer, then that consumer's liveness
/// key and the eight keys of the queue to use instead while it is missing (checked here, so no
/// job enters a queue once its consumer is gone). ARGV: name, data, opts, timestamp, priority
/// (0 = none).
const ADD: &str = r#"
local k = 0
if #KEYS > 8 and redis.call("EXISTS", KEYS[9]) == 0 then k = 9 end
local id = redis.call("INCR", KEYS[k + 1])
-- "bull:<queue>:id" without its "id" is the job key prefix
local job = string.sub(KEYS[k + 1], 1, -3) .. id
local priority = tonumber(ARGV[5])
redis.call("HSET", job, "name", ARGV[1], "data", ARGV[2], "opts", ARGV[3],
  "timestamp", ARGV[4], "delay", 0, "priority", priority)
redis.call("XADD", KEYS[k + 8], "MAXLEN", "~", 10000, "*", "event", "added", "jobId", id, "name", ARGV[1])
if redis.call("HEXISTS", KEYS[k + 6], "paused") == 1 then
  redis.call("LPUSH", KEYS[k + 7], id)
else
  if priority > 0 then
    local n = redis.call("INCR", KEYS[k + 4])
    redis.call("ZADD", KEYS[k + 3], priority * 4294967296 + (n % 4294967296), id)
  else
    redis.call("LPUSH", KEYS[k + 2], id)
  end
  redis.call("ZADD", KEYS[k + 5], 0, "0")
end
redis.call("XADD", KEYS[k + 8], "MAXLEN", "~", 10000, "*", "event", "waiting", "jobId", id)
return id
"#;

/// Takes up to `ARGV[1]` jobs, trying the queues in the order given, and deletes each in the
/// same step (our consumers hold no lock: a job lost to a crash after this is recovered by the
/// engine's lost-dispatch redispatch, which delivery at-least-once already allows). Returns
/// their data. KEYS: per queue, its wait, prioritized and events keys. ARGV: the batch size,
/// then per queue its job key prefix.
const TAKE: &str = r#"
local max = tonumber(ARGV[1])
local out = {}
for q = 0, #KEYS / 3 - 1 do
  local wait, prioritized, events = KEYS[q * 3 + 1], KEYS[q * 3 + 2], KEYS[q * 3 + 3]
  while #out < max do
    local id = redis.call("RPOP", wait)
    if not id then
      local popped = redis.call("ZPOPMIN", prioritized)
      if #popped == 0 then break end
      id = popped[1]
    end
    local job = ARGV[q + 2] .. id
    local data = redis.call("HGET", job, "data")
    redis.call("DEL", job, job .. ":lock", job .. ":logs")
    redis.call("XADD", events, "MAXLEN", "~", 10000, "*", "event", "completed", "jobId", id)
    if data then out[#out + 1] = data end
  end
end
return out
"#;

/// BullMQ's priority for an engine priority `p` (higher wins there, lower wins in BullMQ).
pub fn broker_priority(p: Option<i64>) -> i64 {
    p.map_or(0, |p| (1_048_576 - p).clamp(1, 2_097_151))
}

/// How long a finished job is kept, per job kind (wire §1.3).
#[derive(Clone, Copy, Debug)]
pub enum Retention {
    /// Step tasks: failed ones are kept a day, so the worker's failure bridge can read them.
    Task,
    /// Everything else: removed however it ends.
    Message,
}

impl Retention {
    fn opts(self) -> Value {
        match self {
            Retention::Task => {
                json!({ "removeOnComplete": true, "removeOnFail": { "age": 86_400 } })
            }
            Retention::Message => json!({ "removeOnComplete": true, "removeOnFail": true }),
        }
    }
}

/// A job to add.
pub struct NewJob<'a> {
    /// The BullMQ queue name (`P-tasks-<token>`, `P-results`, ...).
    pub queue: &'a str,
    /// When `queue` is one consumer's own: that consumer's liveness key, and the queue the job
    /// goes to instead while the key is missing.
    pub unless_gone: Option<(&'a str, &'a str)>,
    /// The job name (`task`, `result`, ...).
    pub name: &'a str,
    /// The DTO, as JSON.
    pub data: &'a str,
    /// How long it is kept once finished.
    pub retention: Retention,
    /// The engine priority, if any.
    pub priority: Option<i64>,
}

/// The queue scripts, loaded once per transport.
pub struct Scripts {
    add: Script,
    take: Script,
}

impl Default for Scripts {
    fn default() -> Self {
        Scripts {
            add: Script::new(ADD),
            take: Script::new(TAKE),
        }
    }
}

impl Scripts {
    /// Adds `job`; returns its id.
    pub async fn add<C: redis::aio::ConnectionLike + Send>(
        &self,
        conn: &mut C,
        job: &NewJob<'_>,
    ) -> redis::RedisResult<i64> {
        // In the order the script reads them (`KEYS[k + 1]` to `KEYS[k + 8]`).
        const SUFFIXES: [&str; 8] = [
            "id",
            "wait",
            "prioritized",
            "pc",
            "marker",
            "meta",
            "paused",
            "events",
        ];
        let mut add = self.add.prepare_invoke();
        for suffix in SUFFIXES {
            add.key(bull_key(job.queue, suffix));
        }
        if let Some((alive, otherwise)) = job.unless_gone {
            add.key(alive);
            for suffix in SUFFIXES {
                add.key(bull_key(otherwise, suffix));
            }
        }
        add.arg(job.name)
            .arg(job.data)
            .arg(job.retention.opts().to_string())
            .arg(super::now_ms())
            .arg(broker_priority(job.priority))
            .invoke_async(conn)
            .await
    }

    /// Takes (and removes) up to `max` jobs from `queues`, in one round trip: the data of each,
    /// the first queue's jobs first. Callers rotate the order so no queue starves.
    pub async fn take<C: redis::aio::ConnectionLike + Send>(
        &self,
        conn: &mut C,
        queues: &[String],
        max: usize,
    ) -> redis::RedisResult<Vec<String>> {
        match self.take_cmd(queues, max).query_async(conn).await {
            Err(e) if is_no_script(&e) => {
                self.take.load_async(conn).await?;
                self.take_cmd(queues, max).query_async(conn).await
            }
            taken => taken,
        }
    }

    /// Waits up to `block_secs` for a marker of any of `markers` (a job was added), then takes
    /// as [`Scripts::take`] does, in one round trip: the take is queued behind the blocking pop
    /// on the same connection, so Redis runs it the moment the wait ends instead of after the
    /// wake-up travelled to us and a take travelled back.
    pub async fn wait_and_take<C: redis::aio::ConnectionLike + Send>(
        &self,
        conn: &mut C,
        markers: &[String],
        block_secs: f64,
        queues: &[String],
        max: usize,
    ) -> redis::RedisResult<Vec<String>> {
        let mut pipe = redis::pipe();
        pipe.cmd("BZPOPMIN")
            .arg(markers)
            .arg(block_secs)
            .ignore()
            .add_command(self.take_cmd(queues, max));
        match pipe.query_async::<(Vec<String>,)>(conn).await {
            Ok((taken,)) => Ok(taken),
            // The wait is over either way; load the script and take as usual.
            Err(e) if is_no_script(&e) => self.take(conn, queues, max).await,
            Err(e) => Err(e),
        }
    }

    /// The take script's `EVALSHA` (see [`TAKE`]) for `queues`.
    fn take_cmd(&self, queues: &[String], max: usize) -> redis::Cmd {
        let mut keys = Vec::with_capacity(queues.len() * 3);
        let mut prefixes = Vec::with_capacity(queues.len());
        for queue in queues {
            keys.extend(["wait", "prioritized", "events"].map(|k| bull_key(queue, k)));
            prefixes.push(bull_key(queue, ""));
        }
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(self.take.get_hash())
            .arg(keys.len())
            .arg(keys)
            .arg(max)
            .arg(prefixes);
        cmd
    }
}

/// Whether Redis did not know a script (restarted or flushed since it was loaded).
fn is_no_script(e: &redis::RedisError) -> bool {
    e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::redis::testing;

    /// After a Redis restart or `SCRIPT FLUSH` the take script is unknown: the wait still ends
    /// on the marker, and the jobs are taken once the script is loaded again, exactly once.
    #[tokio::test]
    async fn a_wait_takes_its_jobs_when_redis_forgot_the_script() {
        let Some(transport) = testing::fresh_transport().await else {
            return;
        };
        let mut conn = transport.shared.conn.clone();
        // A take script Redis has never seen (its hash is new), as after a flush.
        let scripts = Scripts {
            add: Script::new(ADD),
            take: Script::new(&format!("{TAKE}\n-- {}", uuid::Uuid::new_v4())),
        };
        let queue = format!("{}-probe", testing::fresh_prefix());
        for data in ["one", "two"] {
            let job = NewJob {
                queue: &queue,
                name: "task",
                data,
                retention: Retention::Message,
                priority: None,
                unless_gone: None,
            };
            scripts.add(&mut conn, &job).await.expect("add");
        }
        let markers = [bull_key(&queue, "marker")];
        let queues = [queue.clone()];
        let taken = scripts
            .wait_and_take(&mut conn, &markers, 1.0, &queues, 32)
            .await
            .expect("wait and take");
        assert_eq!(taken, ["one", "two"]);
        let again = scripts
            .wait_and_take(&mut conn, &markers, 0.05, &queues, 32)
            .await
            .expect("wait and take");
        assert!(again.is_empty(), "each job is taken once: {again:?}");
    }

    #[test]
    fn priorities_map_like_the_sdks() {
        assert_eq!(broker_priority(None), 0);
        assert_eq!(broker_priority(Some(5)), 1_048_571);
        assert_eq!(broker_priority(Some(2_000_000)), 1);
        assert_eq!(broker_priority(Some(-2_000_000)), 2_097_151);
    }
}
