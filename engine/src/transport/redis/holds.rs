//! Jobs our processes took and have not settled: a control plane's step results until they are
//! checkpointed, a worker's tasks and turns until their answer is sent.
//!
//! A holding take leaves the job's hash in place and enters the job in the taker's hash
//! (`P-taken:<instance>`) under the take's id; settling deletes it ([`Settle::Done`]) or queues
//! it again ([`Settle::GiveBack`]). The taker keeps a liveness key (`P-taker:<instance>`,
//! renewed every [`EVERY`], gone [`TTL`] after the last renewal) and lists itself in
//! `P-takers` with every holding take. Once the key is gone (a crash, a process paused past it, or a clean stop that
//! left jobs unsettled), any live control plane queues what the hash still holds again, at the
//! front of each job's own queue, in one script per batch ([`reclaim_gone`]): nothing taken is
//! lost, and a job comes back as itself, so a task is still one job per try.
//!
//! A taker thought gone may come back (a paused process) still holding copies of jobs that went
//! back. A receipt settles only its own take; a stale copy that finishes anyway marks its job
//! done, so the job is withdrawn from its queue, or skipped by whoever holds it now, instead of
//! running again after its answer; and a worker runs a held job only if the take is still
//! current ([`Holds::still_held`]) when it may not be: the job went back once from a taker
//! thought gone (a reclaimed job carries `rcl`, a stalled one BullMQ's `stc`), or this
//! process's own hold may have lapsed since the take ([`Holds::epoch`]). Otherwise no copy can
//! exist, and the check, a round trip per task, is skipped. A worker's answer and the settling of its task are one
//! script (`ANSWER` in [`super::queue`]), so no copy of a task can start after its result
//! exists unless it had started before.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use redis::{AsyncCommands, Script};
use tokio::sync::mpsc;

use super::Shared;
use crate::model::{Receipt, Settle};
use crate::transport::naming::{taken_key, taker_key, takers_key};

/// How often a taker renews its liveness key.
#[cfg(not(test))]
const EVERY: Duration = Duration::from_secs(2);
#[cfg(test)]
const EVERY: Duration = Duration::from_millis(100);
/// How long the key outlives its last renewal: what a crash costs before its jobs go back.
#[cfg(not(test))]
const TTL: Duration = Duration::from_secs(6);
#[cfg(test)]
const TTL: Duration = Duration::from_millis(600);
/// The margin by which a renewal must beat the key's TTL to count as keeping it alive (the
/// renewal travels, and clocks drift).
const SLACK: Duration = Duration::from_millis(if cfg!(test) { 200 } else { 1000 });
/// The most settlements or reclaimed jobs one script handles (a script blocks Redis).
const BATCH: usize = 256;

/// The Lua functions the settling and reclaiming scripts share, on job key `job`
/// (`bull:<queue>:<id>`):
///
/// - `finish(job)` deletes it;
/// - `requeue(job)` puts it back at the front of its queue, as BullMQ puts a stalled job back
///   (false if it is gone; a job a stale copy finished is deleted instead);
/// - `withdraw(job)`, for a job a stale copy finished: deletes it if it waits in its queue, and
///   marks it finished for whoever holds it now.
macro_rules! job_functions {
    () => {
        r#"
local function split(job)
  return string.match(job, "^(.*:)([^:]*)$")
end
local function finish(job)
  local prefix, id = split(job)
  redis.call("DEL", job, job .. ":lock", job .. ":logs")
  if prefix then
    redis.call("XADD", prefix .. "events", "MAXLEN", "~", 10000, "*", "event", "completed", "jobId", id)
  end
end
local function requeue(job)
  local prefix, id = split(job)
  if not prefix or redis.call("EXISTS", job) == 0 then return false end
  if redis.call("HEXISTS", job, "finishedOn") == 1 then
    finish(job)
    return false
  end
  redis.call("HDEL", job, "processedOn")
  local priority = tonumber(redis.call("HGET", job, "priority")) or 0
  if redis.call("HEXISTS", prefix .. "meta", "paused") == 1 then
    redis.call("RPUSH", prefix .. "paused", id)
  else
    if priority > 0 then
      local n = redis.call("INCR", prefix .. "pc")
      redis.call("ZADD", prefix .. "prioritized", priority * 4294967296 + (n % 4294967296), id)
    else
      redis.call("RPUSH", prefix .. "wait", id)
    end
    redis.call("ZADD", prefix .. "marker", 0, "0")
  end
  redis.call("XADD", prefix .. "events", "MAXLEN", "~", 10000, "*", "event", "waiting", "jobId", id, "prev", "active")
  return true
end
local function withdraw(job, now)
  local prefix, id = split(job)
  if not prefix or redis.call("EXISTS", job) == 0 then return end
  local waited = redis.call("LREM", prefix .. "wait", 0, id)
    + redis.call("ZREM", prefix .. "prioritized", id)
    + redis.call("LREM", prefix .. "paused", 0, id)
  if waited > 0 then
    finish(job)
  else
    redis.call("HSET", job, "finishedOn", now)
  end
end
"#
    };
}

/// Settles jobs the taker took. KEYS: the taker's hash. ARGV: the time (ms), then per job its
/// key, its take's id and `d` (done) or `g` (give back). A take that is no longer the job's
/// current one is stale: done, it withdraws the job; given back, it changes nothing.
const SETTLE: &str = concat!(
    job_functions!(),
    r#"
for i = 2, #ARGV, 3 do
  local job, take, how = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  if redis.call("HGET", KEYS[1], job) == take then
    redis.call("HDEL", KEYS[1], job)
    if how == "g" then requeue(job) else finish(job) end
  elseif how == "d" then
    withdraw(job, ARGV[1])
  end
end
return 0
"#
);

/// Queues again up to `ARGV[2]` jobs a gone taker held, unless its liveness key exists; once
/// its hash is empty, forgets the taker. Returns how many went back, or -1 if the key exists.
/// KEYS: the taker's liveness key, its hash, the takers' set. ARGV: the taker, the batch size.
const RECLAIM: &str = concat!(
    job_functions!(),
    r#"
if redis.call("EXISTS", KEYS[1]) == 1 then return -1 end
local moved = 0
for _, job in ipairs(redis.call("HRANDFIELD", KEYS[2], tonumber(ARGV[2]))) do
  redis.call("HDEL", KEYS[2], job)
  if requeue(job) then
    -- The gone taker may come back with a copy: whoever takes the job checks first.
    redis.call("HSET", job, "rcl", 1)
    moved = moved + 1
  end
end
if redis.call("HLEN", KEYS[2]) == 0 then
  redis.call("SREM", KEYS[3], ARGV[1])
end
return moved
"#
);

/// Gives back every job of the take whose ids start with `ARGV[1]` (a take whose answer never
/// reached its taker). KEYS: the taker's hash.
const RELEASE: &str = concat!(
    job_functions!(),
    r#"
local cursor, released = "0", 0
repeat
  local page = redis.call("HSCAN", KEYS[1], cursor, "COUNT", 256)
  cursor = page[1]
  for i = 1, #page[2], 2 do
    local job, take = page[2][i], page[2][i + 1]
    if string.sub(take, 1, #ARGV[1]) == ARGV[1] then
      redis.call("HDEL", KEYS[1], job)
      if requeue(job) then released = released + 1 end
    end
  end
until cursor == "0"
return released
"#
);

/// Whether take `ARGV[2]` of job `ARGV[1]` is still the taker's (hash `KEYS[1]`): 0 if not, 2
/// if it is but a stale copy finished the job meanwhile, else 1.
const STILL_HELD: &str = r#"
if redis.call("HGET", KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
if redis.call("HEXISTS", ARGV[1], "finishedOn") == 1 then return 2 end
return 1
"#;

/// One transport's holds: its hash's key, and the settler its receipts report to, started by
/// the first holding consumer.
pub(super) struct Holds {
    taken: String,
    /// When the last renewal of the liveness key was sent, and how many times a renewal came
    /// later than the key's TTL (each time, the key may have lapsed and a peer reclaimed).
    renewed: std::sync::Mutex<(std::time::Instant, u64)>,
    settler: OnceLock<mpsc::UnboundedSender<Settlement>>,
    settle: Script,
    reclaim: Script,
    still_held: Script,
    release: Script,
}

/// Whether a take is still its taker's (see [`Holds::still_held`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Current {
    /// It is, and the job waits to be run.
    Yes,
    /// It is, but a stale copy finished the job.
    Done,
    /// The job went back, or is another take's now.
    No,
}

/// A job's key, its take's id, and how the take is settled.
type Settlement = (String, String, Settle);

impl Holds {
    pub(super) fn new(p: &str, instance: &str) -> Self {
        Holds {
            taken: taken_key(p, instance),
            renewed: std::sync::Mutex::new((std::time::Instant::now(), 0)),
            settler: OnceLock::new(),
            settle: Script::new(SETTLE),
            reclaim: Script::new(RECLAIM),
            still_held: Script::new(STILL_HELD),
            release: Script::new(RELEASE),
        }
    }

    /// The taker's hash, for the take script.
    pub(super) fn taken_key(&self) -> &str {
        &self.taken
    }

    /// Makes this process a taker before its first holding take: sets its liveness key and
    /// lists it, then keeps the key alive while the transport lives and starts the settler.
    /// Idempotent.
    pub(super) async fn start(shared: &Arc<Shared>) -> redis::RedisResult<()> {
        if shared.holds.settler.get().is_some() {
            return Ok(());
        }
        let mut conn = shared.conn.clone();
        let sent = std::time::Instant::now();
        renew(&shared.p, &shared.instance, &mut conn).await?;
        shared.holds.renewed(sent);
        let (tx, rx) = mpsc::unbounded_channel();
        let receipts = tx.downgrade();
        if shared.holds.settler.set(tx).is_err() {
            // Another consumer started it meanwhile.
            return Ok(());
        }
        tokio::spawn(settle_loop(shared.clone(), rx));
        tokio::spawn(keep_alive(
            shared.conn.clone(),
            (shared.p.clone(), shared.instance.clone()),
            receipts,
            Arc::downgrade(shared),
        ));
        Ok(())
    }

    /// Gives `jobs` (key and take id) back at once: held, but never handed to whoever
    /// consumed them (the consumer stopped).
    pub(super) fn give_back(&self, jobs: impl IntoIterator<Item = (String, String)>) {
        if let Some(settler) = self.settler.get() {
            for (job, take) in jobs {
                let _ = settler.send((job, take, Settle::GiveBack));
            }
        }
    }

    /// The receipt of take `take` of held job `job`: it settles the take when its last copy
    /// drops, as `unless_told` unless told otherwise.
    pub(super) fn receipt(&self, job: String, take: String, unless_told: Settle) -> Receipt {
        let Some(settler) = self.settler.get().cloned() else {
            return Receipt::default();
        };
        let settling = (job.clone(), take.clone());
        Receipt::new(job, take, unless_told, move |how| {
            // The settler is gone only with the transport; the job then goes back when the
            // liveness key lapses.
            let _ = settler.send((settling.0, settling.1, how));
        })
    }

    /// Whether take `take` of job `job` is still this process's, and whether a stale copy
    /// finished the job meanwhile: a worker runs a held job only if it is current and not done.
    pub(super) async fn still_held(
        &self,
        conn: &mut redis::aio::ConnectionManager,
        job: &str,
        take: &str,
    ) -> redis::RedisResult<Current> {
        let held: i64 = self
            .still_held
            .key(&self.taken)
            .arg(job)
            .arg(take)
            .invoke_async(conn)
            .await?;
        Ok(match held {
            1 => Current::Yes,
            2 => Current::Done,
            _ => Current::No,
        })
    }

    /// The hold epoch: it changes whenever the liveness key may have lapsed since the last
    /// look. A take sent in epoch `e` whose job is not suspect needs no check before it runs
    /// while [`Holds::continuous_since`] `e`: nobody can have reclaimed it.
    pub(super) fn epoch(&self) -> u64 {
        self.renewed.lock().unwrap_or_else(|p| p.into_inner()).1
    }

    /// Whether the liveness key has lived without a gap since epoch `epoch` began, and still
    /// does (with a second to spare).
    pub(super) fn continuous_since(&self, epoch: u64) -> bool {
        let (sent, now_epoch) = *self.renewed.lock().unwrap_or_else(|p| p.into_inner());
        now_epoch == epoch && sent.elapsed() + SLACK < TTL
    }

    /// Notes a successful renewal sent at `sent`.
    fn renewed(&self, sent: std::time::Instant) {
        let mut renewed = self.renewed.lock().unwrap_or_else(|p| p.into_inner());
        if sent.duration_since(renewed.0) + SLACK >= TTL {
            renewed.1 += 1;
        }
        renewed.0 = renewed.0.max(sent);
    }

    /// Gives back whatever take `token` holds: a take whose answer never reached this process
    /// (the connection failed, or the consumer stopped while the take was on its way), so no
    /// receipt will ever settle it.
    pub(super) async fn release(
        &self,
        conn: &mut redis::aio::ConnectionManager,
        token: &str,
    ) -> redis::RedisResult<usize> {
        let released: i64 = self
            .release
            .key(&self.taken)
            .arg(format!("{token}."))
            .invoke_async(conn)
            .await?;
        Ok(usize::try_from(released).unwrap_or(0))
    }
}

async fn renew(
    p: &str,
    instance: &str,
    conn: &mut redis::aio::ConnectionManager,
) -> redis::RedisResult<()> {
    redis::pipe()
        .pset_ex(
            taker_key(p, instance),
            1,
            u64::try_from(TTL.as_millis()).unwrap_or(u64::MAX),
        )
        .ignore()
        .sadd(takers_key(p), instance)
        .ignore()
        .query_async(conn)
        .await
}

/// Renews the liveness key while anything can still settle a take (the transport, or a receipt
/// still out: `receipts` counts the settler's senders), then withdraws it: what is still held
/// then goes back at a control plane's next recovery round.
async fn keep_alive(
    mut conn: redis::aio::ConnectionManager,
    (p, instance): (String, String),
    receipts: mpsc::WeakUnboundedSender<Settlement>,
    shared: std::sync::Weak<Shared>,
) {
    loop {
        tokio::time::sleep(EVERY).await;
        if receipts.strong_count() == 0 {
            let _: redis::RedisResult<()> = conn.del(taker_key(&p, &instance)).await;
            return;
        }
        let sent = std::time::Instant::now();
        match renew(&p, &instance, &mut conn).await {
            Ok(()) => {
                if let Some(shared) = shared.upgrade() {
                    shared.holds.renewed(sent);
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "renewing this process's hold on the jobs it took failed; they go back to their queues if it lapses")
            }
        }
    }
}

/// Settles what receipts report, a batch per round trip, until every receipt and the transport
/// are gone. A batch that fails is tried again: until it lands, its jobs stay held.
async fn settle_loop(shared: Arc<Shared>, mut rx: mpsc::UnboundedReceiver<Settlement>) {
    let (taken, script, mut conn) = (
        shared.holds.taken.clone(),
        shared.holds.settle.clone(),
        shared.conn.clone(),
    );
    // The transport may go while receipts are out: hold only what the loop needs.
    drop(shared);
    let mut batch: Vec<Settlement> = Vec::new();
    let mut backoff = Duration::from_millis(100);
    loop {
        if batch.is_empty() {
            match rx.recv().await {
                Some(first) => batch.push(first),
                None => return,
            }
        }
        while batch.len() < BATCH {
            match rx.try_recv() {
                Ok(next) => batch.push(next),
                Err(_) => break,
            }
        }
        let mut invoke = script.key(&taken);
        invoke.arg(super::now_ms());
        for (job, take, how) in &batch {
            invoke.arg(job).arg(take).arg(match how {
                Settle::Done => "d",
                Settle::GiveBack => "g",
            });
        }
        match invoke.invoke_async::<i64>(&mut conn).await {
            Ok(_) => {
                batch.clear();
                backoff = Duration::from_millis(100);
            }
            Err(e) => {
                tracing::warn!(error = %e, jobs = batch.len(), "settling taken jobs failed; trying again");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(5));
            }
        }
    }
}

/// Queues again what every gone taker but this one held. How many jobs went back.
pub(super) async fn reclaim_gone(shared: &Shared) -> redis::RedisResult<usize> {
    let mut conn = shared.conn.clone();
    let p = &shared.p;
    let takers: Vec<String> = conn.smembers(takers_key(p)).await?;
    let mut total = 0;
    for taker in takers.iter().filter(|t| **t != shared.instance) {
        loop {
            let moved: redis::RedisResult<i64> = shared
                .holds
                .reclaim
                .key(taker_key(p, taker))
                .key(taken_key(p, taker))
                .key(takers_key(p))
                .arg(taker)
                .arg(BATCH)
                .invoke_async(&mut conn)
                .await;
            // One taker's failure does not keep the others' jobs held.
            let moved = match moved {
                Ok(moved) => moved,
                Err(e) => {
                    tracing::debug!(error = %e, taker = %taker, "putting back what a stopped process took failed; trying again next round");
                    break;
                }
            };
            let Ok(moved) = usize::try_from(moved) else {
                break;
            };
            total += moved;
            if moved > 0 {
                tracing::info!(taker = %taker, jobs = moved, "queued again the jobs a stopped process took and did not finish");
            }
            if moved < BATCH {
                break;
            }
        }
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::StepResult;
    use crate::transport::StepQueues;
    use crate::transport::naming::{bull_key, results_queue};
    use crate::transport::redis::inbox::Hold;
    use crate::transport::redis::queue::{NewJob, Retention};
    use crate::transport::redis::{RedisConfig, RedisTransport, testing};
    use futures::StreamExt;

    async fn peer(of: &RedisTransport) -> RedisTransport {
        let config = RedisConfig {
            prefix: of.prefix().to_owned(),
            ..RedisConfig::new(testing::test_url())
        };
        RedisTransport::connect(config).await.expect("connect")
    }

    async fn add(transport: &RedisTransport, queue: &str, id: &str) {
        let job = NewJob {
            queue,
            unless_gone: None,
            name: "task",
            data: "{\"n\":1}",
            retention: Retention::Task,
            priority: None,
            job_id: Some(id),
        };
        let mut conn = transport.shared.conn.clone();
        transport
            .shared
            .scripts
            .add(&mut conn, &job)
            .await
            .expect("add");
    }

    async fn waiting(transport: &RedisTransport, queue: &str) -> Vec<String> {
        let mut conn = transport.shared.conn.clone();
        redis::cmd("LRANGE")
            .arg(bull_key(queue, "wait"))
            .arg(0)
            .arg(-1)
            .query_async(&mut conn)
            .await
            .expect("lrange")
    }

    async fn exists(transport: &RedisTransport, key: &str) -> bool {
        let mut conn = transport.shared.conn.clone();
        conn.exists(key).await.expect("exists")
    }

    /// A job taken by a process that then stops without settling it goes back to its queue as
    /// itself once the process's key is gone, for another to take; settled there, it is gone.
    #[tokio::test]
    async fn what_a_gone_taker_held_goes_back_as_itself() {
        let Some(taker) = testing::fresh_transport().await else {
            return;
        };
        let other = peer(&taker).await;
        let queue = format!("{}-tasks-charge@acme", taker.prefix());
        add(&taker, &queue, "run~1@0@1").await;
        let (mut items, _alive) =
            taker.consume_held::<serde_json::Value>(vec![queue.clone()], "task", Hold::Checked);
        let (_, receipt) = items.next().await.expect("the job");
        let taker_instance = taker.instance_id().to_owned();
        // It dies holding the job: its receipt never settles, its key is not renewed.
        receipt.settled();
        drop(receipt);
        drop(items);
        drop(taker);
        assert!(waiting(&other, &queue).await.is_empty(), "held, not queued");
        let mut back = 0;
        for _ in 0..100 {
            back += reclaim_gone(&other.shared).await.expect("reclaim");
            if back > 0 {
                break;
            }
            tokio::time::sleep(TTL / 4).await;
        }
        assert_eq!(back, 1);
        assert_eq!(waiting(&other, &queue).await, ["run~1@0@1"], "the same job");
        let p = other.prefix();
        assert!(!exists(&other, &taken_key(p, &taker_instance)).await);
        let mut conn = other.shared.conn.clone();
        let takers: Vec<String> = conn.smembers(takers_key(p)).await.expect("takers");
        assert!(!takers.contains(&taker_instance), "forgotten once emptied");
        // Taken again and settled: gone for good.
        let (mut items, _alive) =
            other.consume_held::<serde_json::Value>(vec![queue.clone()], "task", Hold::Checked);
        let (value, receipt) = items.next().await.expect("the job again");
        assert_eq!(value, serde_json::json!({ "n": 1 }));
        receipt.done();
        drop(receipt);
        let job = bull_key(&queue, "run~1@0@1");
        for _ in 0..100 {
            if !exists(&other, &job).await {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(!exists(&other, &job).await, "settled");
        assert!(waiting(&other, &queue).await.is_empty());
    }

    /// Results a control plane took but never handed on (its results loop stopped) go back at
    /// once; the one it applied is settled. A result given back is queued again.
    #[tokio::test]
    async fn results_not_handed_on_go_back_and_one_given_back_is_queued_again() {
        let Some(transport) = testing::fresh_transport().await else {
            return;
        };
        let result = |seq: u32| StepResult {
            run_id: crate::model::RunId::parse("run-held").expect("id"),
            seq,
            step_id: format!("run-held:{seq}"),
            started_at: None,
            outcome: crate::model::StepOutcome::Completed {
                output: serde_json::Value::Null,
            },
            receipt: Default::default(),
        };
        for seq in 0..3 {
            transport
                .publish_result(result(seq), None)
                .await
                .expect("publish");
        }
        let shared_queue = results_queue(transport.prefix());
        let mut results = transport.consume_results().await.expect("consume");
        let first = results.next().await.expect("a result");
        assert!(first.receipt.is_held());
        drop(results);
        let queued = async |n: usize| {
            for _ in 0..100 {
                if waiting(&transport, &shared_queue).await.len() == n {
                    return true;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            false
        };
        assert!(queued(2).await, "the two not handed on");
        first.receipt.give_back();
        drop(first);
        assert!(queued(3).await, "given back");
        let taken = taken_key(transport.prefix(), transport.instance_id());
        assert!(!exists(&transport, &taken).await, "nothing held");
    }

    /// A taker thought gone (paused) whose job went back meanwhile: its copy given back changes
    /// nothing; its copy that finishes withdraws the job if it waits, or marks it done for
    /// whoever holds it now, whose copy is then not handed on: no copy runs after its answer.
    #[tokio::test]
    async fn a_stale_copy_never_runs_after_its_job_is_done() {
        let Some(transport) = testing::fresh_transport().await else {
            return;
        };
        let holds = &transport.shared.holds;
        let queue = format!("{}-tasks-charge@acme", transport.prefix());
        let job = bull_key(&queue, "run~2@0@1");
        let taken = taken_key(transport.prefix(), transport.instance_id());
        let mut conn = transport.shared.conn.clone();
        add(&transport, &queue, "run~2@0@1").await;
        let (mut items, _alive) =
            transport.consume_held::<serde_json::Value>(vec![queue.clone()], "task", Hold::Checked);
        let (_, stale) = items.next().await.expect("the job");
        // What a peer's reclaim does while this taker's key is lapsed; the consumer takes the
        // job again at once.
        let () = redis::pipe()
            .hdel(&taken, &job)
            .ignore()
            .rpush(bull_key(&queue, "wait"), "run~2@0@1")
            .ignore()
            .hset(&job, "rcl", 1)
            .ignore()
            .zadd(bull_key(&queue, "marker"), "0", 0)
            .ignore()
            .query_async(&mut conn)
            .await
            .expect("reclaim by hand");
        tokio::time::sleep(Duration::from_millis(300)).await;
        let current: Option<String> = conn.hget(&taken, &job).await.expect("hget");
        let stale_take = stale.taken().map(|(_, t)| t.to_owned());
        assert!(current.is_some() && current != stale_take, "taken again");
        stale.give_back();
        drop(stale);
        tokio::time::sleep(Duration::from_millis(300)).await;
        let still: Option<String> = conn.hget(&taken, &job).await.expect("hget");
        assert_eq!(still, current, "a stale copy given back changes nothing");
        // A stale copy finishes: the job, held by the current take, is marked done, and that
        // copy is not handed on (it is settled instead).
        drop(holds.receipt(job.clone(), "stale".into(), Settle::Done));
        tokio::time::sleep(Duration::from_millis(300)).await;
        let finished: bool = conn.hexists(&job, "finishedOn").await.expect("hexists");
        assert!(finished, "marked done for whoever holds it now");
        let skipped = tokio::time::timeout(Duration::from_millis(500), items.next()).await;
        assert!(
            skipped.is_err(),
            "a finished job is not handed on: {skipped:?}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!exists(&transport, &job).await, "and is gone");
        // A stale copy of a job that waits withdraws it from its queue.
        let idle = format!("{}-tasks-refund@acme", transport.prefix());
        add(&transport, &idle, "run~3@0@1").await;
        drop(holds.receipt(bull_key(&idle, "run~3@0@1"), "stale".into(), Settle::Done));
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(waiting(&transport, &idle).await.is_empty(), "withdrawn");
        assert!(!exists(&transport, &bull_key(&idle, "run~3@0@1")).await);
    }

    /// A take whose answer never reached its taker (the connection failed on the way) is given
    /// back by its id; the take itself listed the taker, so a crash before that is covered too.
    #[tokio::test]
    async fn a_take_whose_answer_was_lost_is_given_back() {
        let Some(transport) = testing::fresh_transport().await else {
            return;
        };
        let shared = &transport.shared;
        let queue = format!("{}-tasks-charge@acme", transport.prefix());
        add(&transport, &queue, "run~4@0@1").await;
        let takers = takers_key(&shared.p);
        let taker = crate::transport::redis::queue::Taker {
            taken: shared.holds.taken_key(),
            takers: &takers,
            instance: &shared.instance,
            hold: true,
            token: "lost1",
        };
        let mut conn = shared.conn.clone();
        let taken = shared
            .scripts
            .take(&mut conn, std::slice::from_ref(&queue), 8, taker)
            .await
            .expect("take");
        assert_eq!(taken.len(), 1);
        let listed: Vec<String> = conn.smembers(&takers).await.expect("takers");
        assert!(
            listed.contains(&shared.instance),
            "the take listed its taker"
        );
        assert!(waiting(&transport, &queue).await.is_empty());
        // Its answer is lost: nothing will settle it but its id.
        let released = shared
            .holds
            .release(&mut conn, "lost1")
            .await
            .expect("release");
        assert_eq!(released, 1);
        assert_eq!(waiting(&transport, &queue).await, ["run~4@0@1"]);
        assert!(!exists(&transport, shared.holds.taken_key()).await);
    }

    /// A take needs no check while the hold has lived without a gap since it was sent; a
    /// renewal that came later than the key's TTL starts a new epoch, and so does a key left
    /// unrenewed for that long.
    #[test]
    fn the_hold_epoch_changes_when_the_key_may_have_lapsed() {
        use std::time::Instant;
        let holds = Holds::new("p", "me");
        let start = Instant::now();
        holds.renewed(start);
        let epoch = holds.epoch();
        assert!(holds.continuous_since(epoch));
        holds.renewed(start + EVERY);
        assert_eq!(holds.epoch(), epoch, "renewed in time");
        holds.renewed(start + EVERY + TTL);
        assert_eq!(
            holds.epoch(),
            epoch + 1,
            "renewed too late: it may have lapsed"
        );
        assert!(!holds.continuous_since(epoch));
        let quiet = Holds::new("p", "me");
        quiet.renewed(Instant::now());
        assert!(quiet.continuous_since(quiet.epoch()));
        std::thread::sleep(TTL);
        assert!(
            !quiet.continuous_since(quiet.epoch()),
            "unrenewed past its TTL"
        );
    }
}
