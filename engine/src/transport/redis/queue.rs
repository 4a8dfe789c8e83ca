//! BullMQ-compatible queue operations, written from the key layout the aviary wire documents
//! (§1.4): a job is a hash `bull:<q>:<id>` (`name`, `data`, `opts`, `timestamp`, `delay`,
//! `priority`) whose id waits in `bull:<q>:wait` (or `:prioritized`), and a worker blocked on
//! `bull:<q>:marker` is woken by a marker entry. The Node and Python SDKs consume jobs added
//! here, and we consume theirs. Each operation is one Lua script, so it is atomic.

use redis::Script;
use serde_json::{Value, json};

use crate::transport::naming::bull_key;

/// The Lua function both adding scripts share: `add(k, ...)` adds a job to the queue whose
/// eight keys are `KEYS[k + 1]` to `KEYS[k + 8]`: id, wait, prioritized, pc, marker, meta,
/// paused and events. Returns its id.
///
/// With a `custom` id, as BullMQ's own add does with `jobId`, a job of that id still waiting or
/// running (its hash exists and has no `finishedOn`) is kept and nothing is added; a finished
/// one (failed jobs are kept a day) is cleared first, so its id can run again.
macro_rules! add_function {
    () => {
        r#"
local function add(k, name, data, opts, timestamp, priority, custom)
  -- "bull:<queue>:id" without its "id" is the job key prefix
  local prefix = string.sub(KEYS[k + 1], 1, -3)
  local id
  if custom and custom ~= "" then
    id = custom
    local old = prefix .. id
    if redis.call("EXISTS", old) == 1 then
      if redis.call("HEXISTS", old, "finishedOn") == 0 then
        redis.call("XADD", KEYS[k + 8], "MAXLEN", "~", 10000, "*", "event", "duplicated", "jobId", id)
        return id
      end
      redis.call("ZREM", prefix .. "failed", id)
      redis.call("ZREM", prefix .. "completed", id)
      redis.call("DEL", old, old .. ":logs", old .. ":lock")
    end
  else
    id = redis.call("INCR", KEYS[k + 1])
  end
  local job = prefix .. id
  redis.call("HSET", job, "name", name, "data", data, "opts", opts,
    "timestamp", timestamp, "delay", 0, "priority", priority)
  redis.call("XADD", KEYS[k + 8], "MAXLEN", "~", 10000, "*", "event", "added", "jobId", id, "name", name)
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
end
"#
    };
}

/// Adds a job; returns its id. KEYS: the queue's eight keys (see [`add_function`]); for a
/// job meant for one consumer's own queue, then that consumer's liveness key and the eight keys
/// of the queue to use instead while the key is missing (checked here, atomically with the
/// add). ARGV: name, data, opts, timestamp, priority (0 = none), custom id ("" = none).
const ADD: &str = concat!(
    add_function!(),
    r#"
local k = 0
if #KEYS > 8 and redis.call("EXISTS", KEYS[9]) == 0 then k = 9 end
return add(k, ARGV[1], ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5]), ARGV[6])
"#
);

/// Adds a result and settles the task take it answers, in one step (see [`super::holds`]): no
/// copy of the task can start after its result exists unless it had started before. A take that
/// is no longer current (the task went back while its taker was thought gone) withdraws the
/// task instead. KEYS: the taker's hash, then [`ADD`]'s keys. ARGV: [`ADD`]'s, then the time
/// (ms), the task's job key and its take id.
const ANSWER: &str = concat!(
    add_function!(),
    job_functions!(),
    r#"
local k = 1
if #KEYS > 9 and redis.call("EXISTS", KEYS[10]) == 0 then k = 10 end
local id = add(k, ARGV[1], ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5]), ARGV[6])
local task, take = ARGV[8], ARGV[9]
if redis.call("HGET", KEYS[1], task) == take then
  redis.call("HDEL", KEYS[1], task)
  finish(task)
else
  withdraw(task, ARGV[7])
end
return id
"#
);

/// Moves up to `ARGV[2]` jobs from one consumer's own queue to another queue, as new jobs
/// there, unless the consumer's liveness key exists; once its queue is empty and it holds no
/// job it took (those come back to the queue first, see [`super::holds`]), deletes the queue's
/// keys and takes `ARGV[1]` out of the set that lists such queues. Nothing else can add
/// to the queue meanwhile (every add checks the key, see [`ADD`]), so an emptied queue stays
/// empty. Returns how many jobs moved, or -1 if the key exists. KEYS: the liveness key, the set,
/// the own queue's eight keys, the other queue's eight keys, then the consumer's taken hash.
const HAND_OVER: &str = concat!(
    add_function!(),
    r#"
if redis.call("EXISTS", KEYS[1]) == 1 then return -1 end
local from = string.sub(KEYS[3], 1, -3)
local moved = 0
while moved < tonumber(ARGV[2]) do
  local id = redis.call("RPOP", KEYS[4])
  if not id then
    local popped = redis.call("ZPOPMIN", KEYS[5])
    if #popped == 0 then break end
    id = popped[1]
  end
  local job = from .. id
  local f = redis.call("HMGET", job, "name", "data", "opts", "timestamp", "priority")
  redis.call("DEL", job, job .. ":lock", job .. ":logs")
  if f[2] then
    add(10, f[1] or "result", f[2], f[3] or "{}", f[4] or "0", tonumber(f[5]) or 0)
    moved = moved + 1
  end
end
if redis.call("LLEN", KEYS[4]) == 0 and redis.call("ZCARD", KEYS[5]) == 0
  and redis.call("EXISTS", KEYS[19]) == 0 then
  redis.call("DEL", KEYS[3], KEYS[6], KEYS[7], KEYS[10])
  redis.call("SREM", KEYS[2], ARGV[1])
end
return moved
"#
);

/// Takes up to `ARGV[1]` jobs, trying the queues in the order given. With `ARGV[2]` = "1" each
/// job stays, entered in the taker's hash `KEYS[1]` under this take's id (`ARGV[4]`, then the
/// job's place in the batch) until the taker settles it (see [`super::holds`]), and the taker
/// (`ARGV[5]`) is listed in the takers' set `KEYS[2]`; a job a stale copy already finished
/// meanwhile is deleted instead of taken, and the take id of one that ever went back from a
/// taker thought gone (a reclaimed or stalled job) ends in `!`. Otherwise each job is deleted
/// in the same step (a job lost to a crash after this is one the engine's lost-dispatch
/// redispatch sends again, which delivery at-least-once allows). Returns each job's key, take
/// id ("" when not held) and data, flat. KEYS: the taker's hash, the takers' set, then per queue
/// its wait, prioritized and events keys. ARGV: the batch size, the hold flag, the time (ms), the
/// take's id, the taker, then per queue its job key prefix.
const TAKE: &str = r#"
local max = tonumber(ARGV[1])
local hold = ARGV[2] == "1"
local out = {}
local n = 0
for q = 0, (#KEYS - 2) / 3 - 1 do
  local wait, prioritized, events = KEYS[q * 3 + 3], KEYS[q * 3 + 4], KEYS[q * 3 + 5]
  while n < max do
    local id = redis.call("RPOP", wait)
    if not id then
      local popped = redis.call("ZPOPMIN", prioritized)
      if #popped == 0 then break end
      id = popped[1]
    end
    local job = ARGV[q + 6] .. id
    local data, finished, reclaimed, stalled =
      unpack(redis.call("HMGET", job, "data", "finishedOn", "rcl", "stc"))
    if data and hold and not finished then
      n = n + 1
      -- A job that ever went back from a taker thought gone may have a stale copy out there:
      -- its take id says so, and the taker checks it is still current before running it.
      local take = ARGV[4] .. "." .. n
      if reclaimed or stalled then take = take .. "!" end
      redis.call("HSET", KEYS[1], job, take)
      redis.call("SADD", KEYS[2], ARGV[5])
      redis.call("HSET", job, "processedOn", ARGV[3])
      redis.call("XADD", events, "MAXLEN", "~", 10000, "*", "event", "active", "jobId", id)
      out[#out + 1] = job
      out[#out + 1] = take
      out[#out + 1] = data
    else
      redis.call("DEL", job, job .. ":lock", job .. ":logs")
      redis.call("XADD", events, "MAXLEN", "~", 10000, "*", "event", "completed", "jobId", id)
      if data and not hold then
        n = n + 1
        out[#out + 1] = job
        out[#out + 1] = ""
        out[#out + 1] = data
      end
    end
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
    /// A job id of the caller's (BullMQ's `jobId`): a job of that id still waiting or running
    /// is kept instead of adding another (see [`add_function`]).
    pub job_id: Option<&'a str>,
}

/// Who takes, and whether they hold what they take (see [`TAKE`]).
#[derive(Clone, Copy, Debug)]
pub struct Taker<'a> {
    /// The taker's hash of held jobs.
    pub taken: &'a str,
    /// The set that lists takers.
    pub takers: &'a str,
    /// The taker's instance id.
    pub instance: &'a str,
    /// Whether jobs are held until settled, or deleted as taken.
    pub hold: bool,
    /// This take's id, fresh for each take: what a take whose answer was lost is given back by.
    pub token: &'a str,
}

/// A job a consumer took: its key (`bull:<queue>:<id>`) and the id of this take of it, by
/// which a held one is settled, and its data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Taken {
    /// The job's key.
    pub job: String,
    /// This take's id ("" when the job is not held).
    pub take: String,
    /// The job's data (the DTO's JSON).
    pub data: String,
    /// The taker's hold epoch when the take was sent (see [`super::holds::Holds::epoch`]).
    pub epoch: u64,
}

impl Taken {
    /// Whether a stale copy of the job may be out there: it went back once from a taker
    /// thought gone (see [`TAKE`]).
    pub fn suspect(&self) -> bool {
        self.take.ends_with('!')
    }

    /// The take script's flat answer, key, take id and data after each other, as jobs.
    fn triples(flat: Vec<String>) -> Vec<Taken> {
        let mut flat = flat.into_iter();
        let mut out = Vec::with_capacity(flat.len() / 3);
        while let (Some(job), Some(take), Some(data)) = (flat.next(), flat.next(), flat.next()) {
            out.push(Taken {
                job,
                take,
                data,
                epoch: 0,
            });
        }
        out
    }
}

/// The queue scripts, loaded once per transport.
pub struct Scripts {
    add: Script,
    answer: Script,
    take: Script,
    hand_over: Script,
}

impl Default for Scripts {
    fn default() -> Self {
        Scripts {
            add: Script::new(ADD),
            answer: Script::new(ANSWER),
            take: Script::new(TAKE),
            hand_over: Script::new(HAND_OVER),
        }
    }
}

/// The adding script's keys and arguments for `job` (see [`ADD`]).
fn add_parts(job: &NewJob<'_>) -> (Vec<String>, Vec<String>) {
    let mut opts = job.retention.opts();
    if let Some(id) = job.job_id {
        opts["jobId"] = id.into();
    }
    let mut keys = queue_keys(job.queue).to_vec();
    if let Some((alive, otherwise)) = job.unless_gone {
        keys.push(alive.to_owned());
        keys.extend(queue_keys(otherwise));
    }
    let args = vec![
        job.name.to_owned(),
        job.data.to_owned(),
        opts.to_string(),
        super::now_ms().to_string(),
        broker_priority(job.priority).to_string(),
        job.job_id.unwrap_or("").to_owned(),
    ];
    (keys, args)
}

/// A queue's eight keys, in the order the adding scripts read them (see [`add_function`]).
fn queue_keys(queue: &str) -> [String; 8] {
    [
        "id",
        "wait",
        "prioritized",
        "pc",
        "marker",
        "meta",
        "paused",
        "events",
    ]
    .map(|suffix| bull_key(queue, suffix))
}

impl Scripts {
    /// Adds `job`; returns its id (that of the job kept, for a custom id still queued).
    pub async fn add<C: redis::aio::ConnectionLike + Send>(
        &self,
        conn: &mut C,
        job: &NewJob<'_>,
    ) -> redis::RedisResult<String> {
        let (keys, args) = add_parts(job);
        let mut add = self.add.prepare_invoke();
        for key in keys {
            add.key(key);
        }
        for arg in args {
            add.arg(arg);
        }
        add.invoke_async(conn).await
    }

    /// Adds `job`, a result, and settles take `task.1` of the task job `task.0` it answers, held
    /// in the taker's hash `taken`, in one step (see [`ANSWER`]). Returns the result's id.
    pub async fn answer<C: redis::aio::ConnectionLike + Send>(
        &self,
        conn: &mut C,
        job: &NewJob<'_>,
        taken: &str,
        task: (&str, &str),
    ) -> redis::RedisResult<String> {
        let (keys, args) = add_parts(job);
        let mut answer = self.answer.prepare_invoke();
        answer.key(taken);
        for key in keys {
            answer.key(key);
        }
        for arg in args {
            answer.arg(arg);
        }
        answer
            .arg(super::now_ms())
            .arg(task.0)
            .arg(task.1)
            .invoke_async(conn)
            .await
    }

    /// Takes up to `max` jobs from `queues`, in one round trip, the first queue's jobs first:
    /// held for `taker` if it holds, else removed (see [`TAKE`]). Callers rotate the order so
    /// no queue starves.
    pub async fn take<C: redis::aio::ConnectionLike + Send>(
        &self,
        conn: &mut C,
        queues: &[String],
        max: usize,
        taker: Taker<'_>,
    ) -> redis::RedisResult<Vec<Taken>> {
        let taken = match self.take_cmd(queues, max, taker).query_async(conn).await {
            Err(e) if is_no_script(&e) => {
                self.take.load_async(conn).await?;
                self.take_cmd(queues, max, taker).query_async(conn).await
            }
            taken => taken,
        };
        taken.map(Taken::triples)
    }

    /// Moves up to `max` jobs from `own`, the own queue of consumer `owner` (listed in set
    /// `owners`, holding what it took in hash `taken`), to `to`, unless the consumer's liveness
    /// key `alive` exists (see [`HAND_OVER`]). How many moved, or `None` if the key exists.
    pub async fn hand_over<C: redis::aio::ConnectionLike + Send>(
        &self,
        conn: &mut C,
        (alive, owners, owner, taken): (&str, &str, &str, &str),
        own: &str,
        to: &str,
        max: usize,
    ) -> redis::RedisResult<Option<usize>> {
        let moved: i64 = self
            .hand_over
            .key(alive)
            .key(owners)
            .key(&queue_keys(own))
            .key(&queue_keys(to))
            .key(taken)
            .arg(owner)
            .arg(max)
            .invoke_async(conn)
            .await?;
        Ok(usize::try_from(moved).ok())
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
        taker: Taker<'_>,
    ) -> redis::RedisResult<Vec<Taken>> {
        let mut pipe = redis::pipe();
        pipe.cmd("BZPOPMIN")
            .arg(markers)
            .arg(block_secs)
            .ignore()
            .add_command(self.take_cmd(queues, max, taker));
        match pipe.query_async::<(Vec<String>,)>(conn).await {
            Ok((taken,)) => Ok(Taken::triples(taken)),
            // The wait is over either way; load the script and take as usual.
            Err(e) if is_no_script(&e) => self.take(conn, queues, max, taker).await,
            Err(e) => Err(e),
        }
    }

    /// The take script's `EVALSHA` (see [`TAKE`]) for `queues`.
    fn take_cmd(&self, queues: &[String], max: usize, taker: Taker<'_>) -> redis::Cmd {
        let mut keys = Vec::with_capacity(2 + queues.len() * 3);
        keys.push(taker.taken.to_owned());
        keys.push(taker.takers.to_owned());
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
            .arg(if taker.hold { "1" } else { "0" })
            .arg(super::now_ms())
            .arg(taker.token)
            .arg(taker.instance)
            .arg(prefixes);
        cmd
    }
}

/// Whether Redis did not know a script (restarted or flushed since it was loaded).
pub(super) fn is_no_script(e: &redis::RedisError) -> bool {
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
            take: Script::new(&format!("{TAKE}\n-- {}", uuid::Uuid::new_v4())),
            ..Scripts::default()
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
                job_id: None,
            };
            scripts.add(&mut conn, &job).await.expect("add");
        }
        let markers = [bull_key(&queue, "marker")];
        let queues = [queue.clone()];
        let take = Taker {
            taken: "unused",
            takers: "unused",
            instance: "unused",
            hold: false,
            token: "t",
        };
        let taken = scripts
            .wait_and_take(&mut conn, &markers, 1.0, &queues, 32, take)
            .await
            .expect("wait and take");
        let data: Vec<&str> = taken.iter().map(|t| t.data.as_str()).collect();
        assert_eq!(data, ["one", "two"]);
        let again = scripts
            .wait_and_take(&mut conn, &markers, 0.05, &queues, 32, take)
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
