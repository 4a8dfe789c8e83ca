use serde::{Deserialize, Serialize};

use super::{Millis, Namespace, Partition};

/// The workers consuming one step name, as the transport sees them: what the dashboard shows
/// as worker health, and how a waiting step knows whether anyone will pick it up.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerGroup {
    /// The step (or workflow) name served.
    pub name: String,
    /// The partition served (a tenant's, or one of its pools); `None` for a worker serving
    /// every partition (the embedded worker of a standalone process).
    pub partition: Option<Partition>,
    /// How many live consumers serve it.
    pub workers: u32,
    /// When a worker of this group was last heard from.
    pub last_seen: Option<Millis>,
}

impl WorkerGroup {
    /// Whether this group consumes routing token `name@partition` (`partition` is `default` for
    /// a bare token).
    pub fn serves(&self, name: &str, partition: &Partition) -> bool {
        self.workers > 0
            && self.name == name
            && self.partition.as_ref().is_none_or(|p| p == partition)
    }

    /// The routing token as people read it: `name@partition`, or `name@*` for every partition.
    pub fn token(&self) -> String {
        match &self.partition {
            Some(p) => format!("{}@{p}", self.name),
            None => format!("{}@*", self.name),
        }
    }
}

/// One namespace's load, for the operator: what is waiting, what is running, what just failed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NamespaceLoad {
    /// The namespace.
    pub namespace: Namespace,
    /// Runs waiting for a driver (`pending`).
    pub pending: u64,
    /// Runs in a turn (`running` or `cancelling`).
    pub running: u64,
    /// Runs waiting on a timer, signal, step or child (`suspended`).
    pub suspended: u64,
    /// Runs no process can serve, or parked by a quota (`blocked`).
    pub blocked: u64,
    /// Runs that failed or died since the window's start.
    pub failed_recently: u64,
}

impl NamespaceLoad {
    /// Runs not yet picked up or unable to proceed: the backlog.
    pub fn backlog(&self) -> u64 {
        self.pending + self.blocked
    }
}
