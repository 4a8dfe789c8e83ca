//! Between control planes: a tenant's routing definitions (pools, rules) changed, and which
//! control planes have dropped their copy since. An edit is announced after its transaction
//! commits; each control plane drops its copy and says so, and the editing one waits (a moment
//! at most) for every live peer to have said so before it answers.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::model::Namespace;
use crate::transport::{Subscription, TransportResult};

/// A change of a tenant's definitions, or a control plane's acknowledgement of one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DefinitionsNotice {
    /// Whose definitions.
    pub tenant: Namespace,
    /// Their version after the change.
    pub version: u64,
    /// On an acknowledgement, the control plane (its driver id) that dropped its copy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seen_by: Option<String>,
}

/// Definition notices between control planes.
#[async_trait]
pub trait DefinitionNotices: Send + Sync + 'static {
    /// Whether a notice reaches other processes: an in-process transport reaches only its
    /// own, so nobody else is waited for.
    fn reaches_peers(&self) -> bool;

    /// Sends `notice` to every control plane, this one included.
    async fn publish_definitions(&self, notice: DefinitionsNotice) -> TransportResult<()>;

    /// Every notice from now on (nothing is replayed to a late subscriber: a control plane
    /// that missed one finds the change by its periodic version check).
    async fn subscribe_definitions(&self) -> TransportResult<Subscription<DefinitionsNotice>>;
}
