//! Test support: a Redis transport on a prefix of its own, so tests running at once on one
//! Redis never see each other's queues, channels or keys.
//!
//! The server is `DURABLE_TEST_REDIS` (default `redis://127.0.0.1:6379`). When
//! `DURABLE_SKIP_REDIS` is set (`make test` sets it, loudly, when Redis is unreachable outside
//! CI) the Redis suites are skipped; otherwise an unreachable server fails the test.

mod reply_hold;

use std::time::{SystemTime, UNIX_EPOCH};

pub use reply_hold::ReplyHold;

use super::queue::{NewJob, Retention};
use super::{RedisConfig, RedisTransport};

/// Test prefixes older than this are deleted when a new test starts.
const STALE_MS: u128 = 10 * 60 * 1000;

/// The Redis URL tests use.
pub fn test_url() -> String {
    std::env::var("DURABLE_TEST_REDIS").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

/// A fresh prefix `dt<ms>x<random>`: unique per test, datable for clean-up.
pub fn fresh_prefix() -> String {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    format!("dt{ms}x{}", &uuid::Uuid::new_v4().simple().to_string()[..8])
}

/// A transport on a fresh prefix; `None` when the Redis suites are skipped. Deletes the keys
/// of test prefixes left over from runs more than ten minutes old.
pub async fn fresh_transport() -> Option<RedisTransport> {
    if std::env::var_os("DURABLE_SKIP_REDIS").is_some() {
        return None;
    }
    let url = test_url();
    let config = RedisConfig {
        prefix: fresh_prefix(),
        ..RedisConfig::new(url.clone())
    };
    let transport = match RedisTransport::connect(config).await {
        Ok(t) => t,
        Err(e) => panic!(
            "{e} (tests need Redis at {url}; set DURABLE_TEST_REDIS, or DURABLE_SKIP_REDIS=1 to skip)"
        ),
    };
    if let Err(e) = drop_stale(&transport).await {
        eprintln!("could not clean up old test keys: {e}");
    }
    Some(transport)
}

/// The Python interpreter with `durable-worker[redis]` installed (`DURABLE_PYTHON`, which
/// `make test` sets up), for the interop tests. Without it a test skips with one loud line,
/// except in CI, where it fails.
pub fn python() -> Option<String> {
    match std::env::var("DURABLE_PYTHON") {
        Ok(p) if !p.is_empty() => Some(p),
        _ if std::env::var_os("CI").is_some() => {
            panic!("DURABLE_PYTHON is not set: `make test` creates the durable-worker virtualenv")
        }
        _ => {
            eprintln!(
                "!!! DURABLE_PYTHON is not set: SKIPPING a Python interop test (run it through `make test`) !!!"
            );
            None
        }
    }
}

/// Queues `data` verbatim as job `name` on BullMQ queue `queue` (a name from
/// [`crate::transport::naming`]), as another SDK or a broken worker might: for tests of what the
/// engine does with messages it did not write.
pub async fn add_raw_job(
    transport: &RedisTransport,
    queue: &str,
    name: &str,
    data: &str,
) -> redis::RedisResult<String> {
    let mut conn = transport.shared.conn.clone();
    let job = NewJob {
        queue,
        name,
        data,
        retention: Retention::Message,
        priority: None,
        unless_gone: None,
        job_id: None,
    };
    transport.shared.scripts.add(&mut conn, &job).await
}

/// Every key matching `pattern` (`SCAN`, never `KEYS`), for tests that look at what a cluster
/// left behind.
pub async fn scan_keys(
    transport: &RedisTransport,
    pattern: &str,
) -> redis::RedisResult<Vec<String>> {
    transport.shared.scan(pattern).await
}

/// How many times each step task job under the transport's prefix was added, by
/// `<events stream>/<job id>`, read from the queues' event streams: one job per try of a step
/// means every count is 1 (a job sent again while still queued or running counts as
/// `duplicated`, not as an add).
pub async fn task_adds(
    transport: &RedisTransport,
) -> redis::RedisResult<std::collections::HashMap<String, usize>> {
    let mut conn = transport.shared.conn.clone();
    let mut added = std::collections::HashMap::new();
    let pattern = format!("bull:{}-tasks-*:events", transport.prefix());
    for stream in scan_keys(transport, &pattern).await? {
        let entries: Vec<(String, Vec<(String, String)>)> = redis::cmd("XRANGE")
            .arg(&stream)
            .arg("-")
            .arg("+")
            .query_async(&mut conn)
            .await?;
        for (_, fields) in entries {
            let field = |name: &str| fields.iter().find(|(k, _)| k == name).map(|(_, v)| v);
            if field("event").map(String::as_str) == Some("added")
                && let Some(job) = field("jobId")
            {
                *added.entry(format!("{stream}/{job}")).or_default() += 1;
            }
        }
    }
    Ok(added)
}

async fn drop_stale(transport: &RedisTransport) -> redis::RedisResult<()> {
    let mut conn = transport.shared.conn.clone();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    for pattern in ["dt*", "bull:dt*"] {
        let keys = scan_keys(transport, pattern).await?;
        let stale: Vec<&String> = keys
            .iter()
            .filter(|k| {
                let name = k.strip_prefix("bull:").unwrap_or(k);
                name.strip_prefix("dt")
                    .and_then(|rest| rest.split('x').next())
                    .and_then(|ms| ms.parse::<u128>().ok())
                    .is_some_and(|ms| now.saturating_sub(ms) > STALE_MS)
            })
            .collect();
        for chunk in stale.chunks(500) {
            redis::cmd("UNLINK")
                .arg(chunk)
                .query_async::<i64>(&mut conn)
                .await?;
        }
    }
    Ok(())
}
