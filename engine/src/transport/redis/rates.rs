//! Rate allowances in Redis: one key per tenant and allowance holding its theoretical arrival
//! time, updated by one script, so every control plane spends the same allowance atomically.
//! The arithmetic is [`crate::fair::rate::take`]'s.

use async_trait::async_trait;
use redis::Script;

use super::{RedisTransport, unavailable};
use crate::fair::rate;
use crate::model::{Millis, Namespace};
use crate::transport::naming::rate_key;
use crate::transport::{RateLimits, TransportResult};

/// KEYS[1] the allowance; ARGV: now (µs), one take's interval (µs), the window (µs). Returns
/// -1 when taken, else the µs until one is free. The key expires once it is a window in the
/// past, when it would allow a full burst anyway.
const TAKE: &str = r"
local now = tonumber(ARGV[1])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local nxt = tat + tonumber(ARGV[2])
local allowed_at = nxt - tonumber(ARGV[3])
if allowed_at > now then return allowed_at - now end
redis.call('SET', KEYS[1], string.format('%d', nxt), 'PX', math.floor((nxt - now) / 1000) + 1000)
return -1
";

/// The script, loaded once per process.
pub(super) fn script() -> Script {
    Script::new(TAKE)
}

#[async_trait]
impl RateLimits for RedisTransport {
    async fn take(
        &self,
        tenant: &Namespace,
        name: &str,
        per_minute: u32,
        now: Millis,
    ) -> TransportResult<Option<Millis>> {
        let shared = &self.shared;
        let mut conn = shared.conn.clone();
        let wait_us: i64 = shared
            .rate_script
            .key(rate_key(&shared.p, tenant, name))
            .arg(now.saturating_mul(1000))
            .arg(rate::interval_us(per_minute))
            .arg(rate::WINDOW_US)
            .invoke_async(&mut conn)
            .await
            .map_err(|e| unavailable(format!("taking a rate allowance: {e}")))?;
        Ok((wait_us >= 0).then(|| (wait_us + 999) / 1000))
    }
}
