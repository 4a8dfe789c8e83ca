//! The options several commands share: where the database and the cluster's broker are, what
//! one request may carry, and the engine a one-shot command drives.

use clap::Args;
use durable::model::InputLimits;

use crate::database;

/// Where the state lives.
#[derive(Debug, Args)]
pub struct DbArgs {
    /// The database: `sqlite://PATH` (created if missing; the default is
    /// sqlite://./data/durable.db) or `postgres://USER@HOST/DATABASE`.
    #[arg(long, env = "DATABASE_URL", global = true)]
    pub database_url: Option<String>,
}

impl DbArgs {
    /// The configured database, or the embedded default.
    pub fn url(&self) -> String {
        self.database_url
            .clone()
            .unwrap_or_else(|| "sqlite://./data/durable.db".into())
    }
}

/// Where the cluster's broker is.
#[derive(Debug, Args)]
pub struct ClusterArgs {
    /// The Redis every control plane and worker of the cluster shares.
    #[arg(long, env = "REDIS_URL")]
    pub redis_url: Option<String>,
    /// The wire prefix of every queue and key (all processes of a cluster must agree).
    #[arg(long, env = "DURABLE_PREFIX", default_value = "durable")]
    pub prefix: String,
}

impl ClusterArgs {
    /// The Redis settings, or an error naming what to set.
    pub(super) fn redis(&self, role: &str) -> anyhow::Result<durable::transport::RedisConfig> {
        self.redis_if_set().ok_or_else(|| {
            anyhow::anyhow!(
                "`durable {role}` works through Redis: set REDIS_URL (for example redis://127.0.0.1:6379)"
            )
        })
    }

    /// The Redis settings, when a Redis is configured.
    pub fn redis_if_set(&self) -> Option<durable::transport::RedisConfig> {
        let url = self.redis_url.as_ref().filter(|u| !u.is_empty())?;
        Some(durable::transport::RedisConfig {
            prefix: self.prefix.clone(),
            ..durable::transport::RedisConfig::new(url.clone())
        })
    }
}

/// What one request may carry: every start, signal, retry and list filter is checked against
/// these, on the API, the dashboard and the wire alike (see `durable::model::InputLimits`).
#[derive(Debug, Args)]
pub struct LimitArgs {
    /// The largest input, signal payload or retry input, in bytes of JSON.
    #[arg(long, env = "DURABLE_MAX_PAYLOAD_BYTES", default_value_t = InputLimits::default().max_payload_bytes as u64, value_parser = clap::value_parser!(u64).range(1..=(256 << 20)))]
    pub max_payload_bytes: u64,
    /// The most tags one run carries.
    #[arg(long, env = "DURABLE_MAX_TAGS", default_value_t = InputLimits::default().max_tags as u64, value_parser = clap::value_parser!(u64).range(0..=10_000))]
    pub max_tags: u64,
    /// The longest tag, in characters.
    #[arg(long, env = "DURABLE_MAX_TAG_CHARS", default_value_t = InputLimits::default().max_tag_chars as u64, value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub max_tag_chars: u64,
    /// The most search attributes one run carries.
    #[arg(long, env = "DURABLE_MAX_ATTRIBUTES", default_value_t = InputLimits::default().max_attributes as u64, value_parser = clap::value_parser!(u64).range(0..=1000))]
    pub max_attributes: u64,
    /// The longest search-attribute string value, in characters.
    #[arg(long, env = "DURABLE_MAX_ATTRIBUTE_VALUE_CHARS", default_value_t = InputLimits::default().max_attribute_value_chars as u64, value_parser = clap::value_parser!(u64).range(1..=65_536))]
    pub max_attribute_value_chars: u64,
    /// The longest workflow or signal name, in characters.
    #[arg(long, env = "DURABLE_MAX_NAME_CHARS", default_value_t = InputLimits::default().max_name_chars as u64, value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub max_name_chars: u64,
    /// The most schedules one tenant keeps.
    #[arg(long, env = "DURABLE_MAX_SCHEDULES", default_value_t = InputLimits::default().max_schedules as u64, value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    pub max_schedules: u64,
}

impl LimitArgs {
    /// The limits these flags set (each within its range already).
    pub fn limits(&self) -> InputLimits {
        let size = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        InputLimits {
            max_payload_bytes: size(self.max_payload_bytes),
            max_tags: size(self.max_tags),
            max_tag_chars: size(self.max_tag_chars),
            max_attributes: size(self.max_attributes),
            max_attribute_value_chars: size(self.max_attribute_value_chars),
            max_name_chars: size(self.max_name_chars),
            max_schedules: size(self.max_schedules),
        }
    }
}

/// An engine for a command an operator runs once against `database_url` (not started: what it
/// changes, a running server picks up at its next poll), on the cluster's Redis when `redis` is
/// set, so events and cancel notices reach live dashboards and in-flight steps at once, and
/// workflows only SDK workers serve are known.
pub async fn operator_engine(
    database_url: &str,
    redis: Option<durable::transport::RedisConfig>,
    config: durable::EngineConfig,
) -> anyhow::Result<durable::Engine> {
    use std::sync::Arc;

    let db = database::open_store(database_url).await?;
    let transport: Arc<dyn durable::transport::Transport> = match redis {
        Some(redis) => Arc::new(durable::transport::RedisTransport::connect(redis).await?),
        None => Arc::new(durable::transport::MemoryTransport::new()),
    };
    Ok(durable::Engine::new(
        db.store,
        transport,
        Arc::new(crate::demo::registry()),
        config,
    ))
}
