//! Whose work a store write or a task is: the lane it waits in, where a stage serves queued work.
//!
//! A store's group commit takes whatever writes are queued; served first come first served, a
//! quiet tenant's write waits behind every write a busy tenant queued before it. The store
//! serves them by [`crate::fair::FairQueue`] instead, and this says which tenant, key and weight
//! each write is of. It travels as task-local context set by the driver around the write, like
//! a tracing span: the store's methods stay what they are (the tenant is in the data they write
//! or in the run they name), and a write made without a lane (a sweep, a lease renewal, an
//! operator's call) is engine work, served in the [`Namespace::system`] lane, which waits behind
//! no tenant's backlog. The driver dispatches step tasks in their tenant's lane too, so a
//! transport that queues them for a shared worker (the in-process one) serves them by weight.

use std::future::Future;

use super::Weight;
use crate::model::Namespace;

tokio::task_local! {
    static LANE: Lane;
}

/// The lane of a write: its tenant, the key it is fair between within the tenant (a workflow),
/// and the tenant's weight.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lane {
    /// Whose write it is.
    pub tenant: Namespace,
    /// The workflow it is of, or another key the tenant's writes are fair between.
    pub key: String,
    /// The tenant's share against the others.
    pub weight: Weight,
}

impl Lane {
    /// The lane of engine-internal writes.
    pub fn system() -> Self {
        Lane {
            tenant: Namespace::system(),
            key: String::new(),
            weight: Weight::default(),
        }
    }

    /// The lane of the write being made in this task: the one [`within`] set, else
    /// [`Lane::system`].
    pub fn current() -> Self {
        LANE.try_with(Lane::clone)
            .unwrap_or_else(|_| Lane::system())
    }
}

/// Runs `write` in `lane`: a store it queues a write in serves it there.
pub async fn within<F: Future>(lane: Lane, write: F) -> F::Output {
    LANE.scope(lane, write).await
}
