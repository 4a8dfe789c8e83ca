//! Rate allowances shared by every control plane on one transport: a tenant's starts per
//! minute (and, for authors, a step's calls per minute per key). In a cluster the allowance must
//! be one counter, or each control plane would grant the whole rate again.

use async_trait::async_trait;

use crate::model::{Millis, Namespace};
use crate::transport::TransportResult;

/// Taking from per-minute allowances ([`crate::fair::rate`]).
#[async_trait]
pub trait RateLimits: Send + Sync + 'static {
    /// Takes one from `tenant`'s allowance `name` of `per_minute` at `now`: `None` when taken,
    /// or how many milliseconds until one is free. The tenant is part of the counter's key, so
    /// one tenant's takes never spend another's.
    async fn take(
        &self,
        tenant: &Namespace,
        name: &str,
        per_minute: u32,
        now: Millis,
    ) -> TransportResult<Option<Millis>>;
}
