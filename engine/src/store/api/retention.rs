//! Retention: deleting finished history a tenant's plan no longer keeps, a run family at a
//! time (a top-level run with its children and continuations), in batches small enough that
//! the writes of live runs never wait long behind one.

use async_trait::async_trait;

use crate::model::{Millis, Namespace};
use crate::store::StoreResult;

/// Finds and deletes expired run families.
#[async_trait]
pub trait Retention: Send + Sync + 'static {
    /// Deletes, with their checkpoints, signals and updates, up to `families` of `tenant`'s run
    /// families whose every run ended (a final status) before `finished_before`: a family with
    /// one run still live or ended since is kept whole. Returns how many runs it deleted. The
    /// run counts follow (the store's triggers); the started and finished totals do not drop.
    async fn prune_runs(
        &self,
        tenant: &Namespace,
        finished_before: Millis,
        families: u32,
    ) -> StoreResult<u64>;

    /// How many runs [`Retention::prune_runs`] would delete now, all batches together.
    async fn prunable_runs(&self, tenant: &Namespace, finished_before: Millis) -> StoreResult<u64>;
}
