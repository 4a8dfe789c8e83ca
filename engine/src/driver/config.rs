//! How an engine's driver runs: its namespace, lease, redispatch window, turn slots, recovery
//! limit, input limits and the master keys that open tenants' connections.

use std::time::Duration;

use crate::model::{InputLimits, Namespace};
use crate::secrets::MasterKeys;

/// How an engine runs.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// The namespace this engine polls and stamps; `None` makes it an operator that drives every
    /// namespace and stamps `default` on starts that name none.
    pub namespace: Option<Namespace>,
    /// The lease holder name (unique per process).
    pub owner: String,
    /// How long a claimed run stays locked without renewal. A crashed driver's runs are taken
    /// over after this long.
    pub lease: Duration,
    /// A remote step with no result after this long is dispatched again.
    pub redispatch_after: Duration,
    /// How many turns may execute at once. A turn keeps its slot until its write commits, so
    /// under a burst the slots must cover the turn rate times the store's commit latency: with
    /// 64, a PostgreSQL control plane completed about 1.5x fewer runs/s than with 512
    /// (bench/HISTORY.md, session 6).
    pub max_concurrent_turns: usize,
    /// The longest the claim loop sleeps before looking for work started elsewhere.
    pub idle_poll: Duration,
    /// How many times a run whose driver died is taken over before it is given up as `dead`
    /// (a run that crashes every process that runs it must not crash them forever).
    pub max_recoveries: u32,
    /// What one start, signal, retry or list filter may carry (see [`InputLimits`]).
    pub limits: InputLimits,
    /// The master key (and, during a rotation, the previous one) that wraps each tenant's
    /// data key; `None`: connections can be neither created nor opened.
    pub master_keys: Option<MasterKeys>,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            namespace: None,
            owner: format!(
                "engine-{}-{}",
                std::process::id(),
                &uuid::Uuid::new_v4().simple().to_string()[..8]
            ),
            lease: Duration::from_secs(30),
            redispatch_after: Duration::from_secs(30),
            max_concurrent_turns: 512,
            idle_poll: Duration::from_millis(500),
            max_recoveries: 5,
            limits: InputLimits::default(),
            master_keys: None,
        }
    }
}
