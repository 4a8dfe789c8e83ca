//! Concurrency slots in Redis: per tenant and counter, a sorted set of holders scored by the end
//! of their lease and a sorted set of waiting runs scored by when they first waited, changed only
//! by scripts, so every control plane takes from the same slots atomically. Times are the
//! engine's clock, passed in, as for the rate allowances.

use async_trait::async_trait;
use redis::Script;

use super::RedisTransport;
use crate::model::{Millis, Namespace, RunId};
use crate::transport::naming::{slot_holders_key, slot_waiters_key};
use crate::transport::{SlotClaim, Slots, TransportError, TransportResult};

/// How long a counter's waiters are kept after the last one joined: a waiting run joins again
/// each time it looks, so only the line of a counter nobody waits for any more expires.
const WAITERS_TTL_MS: i64 = 3_600_000;

/// How long after its last lease a counter's holders set is kept: leases are what count, this
/// only lets an idle counter's key go.
const HOLDERS_GRACE_MS: i64 = 60_000;

/// KEYS: holders, waiters. ARGV: now, holder, limit, lease end, waiter, the two TTLs. Returns 1
/// when the holder has a slot, else 0 (and the waiter is in line).
const ACQUIRE: &str = r"
local now = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZSCORE', KEYS[1], ARGV[2]) or redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[3]) then
  redis.call('ZADD', KEYS[1], ARGV[4], ARGV[2])
  redis.call('PEXPIRE', KEYS[1], math.max(tonumber(ARGV[4]) - now, 0) + tonumber(ARGV[7]))
  redis.call('ZREM', KEYS[2], ARGV[5])
  return 1
end
redis.call('ZADD', KEYS[2], 'NX', now, ARGV[5])
redis.call('PEXPIRE', KEYS[2], ARGV[6])
return 0
";

/// KEYS: holders. ARGV: holder, lease end, now, grace.
const RENEW: &str = r"
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
redis.call('PEXPIRE', KEYS[1], math.max(tonumber(ARGV[2]) - tonumber(ARGV[3]), 0) + tonumber(ARGV[4]))
return 1
";

/// KEYS: holders, waiters. ARGV: holder. Returns the earliest waiter, taken off the line, or
/// false.
const RELEASE: &str = r"
redis.call('ZREM', KEYS[1], ARGV[1])
local next = redis.call('ZPOPMIN', KEYS[2])
return next[1] or false
";

/// The slot scripts, loaded once per transport.
pub(super) struct SlotScripts {
    acquire: Script,
    renew: Script,
    release: Script,
}

impl Default for SlotScripts {
    fn default() -> Self {
        SlotScripts {
            acquire: Script::new(ACQUIRE),
            renew: Script::new(RENEW),
            release: Script::new(RELEASE),
        }
    }
}

fn unavailable(what: &str, e: redis::RedisError) -> TransportError {
    super::unavailable(format!("{what} a concurrency slot: {e}"))
}

#[async_trait]
impl Slots for RedisTransport {
    async fn acquire(
        &self,
        tenant: &Namespace,
        counter: &str,
        claim: SlotClaim<'_>,
        now: Millis,
    ) -> TransportResult<bool> {
        let shared = &self.shared;
        let mut conn = shared.conn.clone();
        let taken: i64 = shared
            .slot_scripts
            .acquire
            .key(slot_holders_key(&shared.p, tenant, counter))
            .key(slot_waiters_key(&shared.p, tenant, counter))
            .arg(now)
            .arg(claim.holder)
            .arg(claim.limit)
            .arg(claim.until)
            .arg(claim.waiter.as_str())
            .arg(WAITERS_TTL_MS)
            .arg(HOLDERS_GRACE_MS)
            .invoke_async(&mut conn)
            .await
            .map_err(|e| unavailable("taking", e))?;
        Ok(taken == 1)
    }

    async fn renew(
        &self,
        tenant: &Namespace,
        counter: &str,
        holder: &str,
        until: Millis,
        now: Millis,
    ) -> TransportResult<()> {
        let shared = &self.shared;
        let mut conn = shared.conn.clone();
        let _: i64 = shared
            .slot_scripts
            .renew
            .key(slot_holders_key(&shared.p, tenant, counter))
            .arg(holder)
            .arg(until)
            .arg(now)
            .arg(HOLDERS_GRACE_MS)
            .invoke_async(&mut conn)
            .await
            .map_err(|e| unavailable("renewing", e))?;
        Ok(())
    }

    async fn release(
        &self,
        tenant: &Namespace,
        counter: &str,
        holder: &str,
    ) -> TransportResult<Option<RunId>> {
        let shared = &self.shared;
        let mut conn = shared.conn.clone();
        let next: Option<String> = shared
            .slot_scripts
            .release
            .key(slot_holders_key(&shared.p, tenant, counter))
            .key(slot_waiters_key(&shared.p, tenant, counter))
            .arg(holder)
            .invoke_async(&mut conn)
            .await
            .map_err(|e| unavailable("giving back", e))?;
        Ok(next.and_then(|id| RunId::parse(&id).ok()))
    }
}
