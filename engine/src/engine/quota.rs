//! Admission against a tenant's plan and its workflow's concurrency limit, before anything is
//! written: an input without the limit's key is refused; a payload over its ceiling is refused;
//! a start over the queue or rate ceiling is refused with when to try again; a start under a
//! concurrency ceiling or limit is accepted and waits its turn (the claim loop starts it when a
//! slot frees), so it must not take the direct first-turn path.

use serde_json::Value;

use super::{Engine, EngineError, QuotaExceeded};
use crate::model::{ConcurrencySlot, Limit, Namespace, Plan};

/// The allowance name `starts_per_minute` spends (see [`crate::transport::RateLimits`]).
const STARTS: &str = "starts";

/// How soon to try again after the queue ceiling refused a start: the queue drains as runs
/// start, which no one can promise a time for.
const QUEUE_RETRY_MS: i64 = 5_000;

/// What admission decided for a start that may go ahead.
pub(super) struct Admitted {
    /// Whether the tenant has a concurrency ceiling or the workflow a limit: the run then waits
    /// for the claim loop's fair, counted start instead of taking a turn slot directly.
    pub counted: bool,
    /// The workflow concurrency slot the run takes, if its workflow has a limit.
    pub concurrency: Option<ConcurrencySlot>,
}

impl Engine {
    /// Checks a start of `workflow` for `tenant` with `input` against the workflow's
    /// concurrency limit (its key must be in the input) and the tenant's plan.
    pub(super) async fn admit_start(
        &self,
        tenant: &Namespace,
        workflow: &str,
        input: &Value,
    ) -> Result<Admitted, EngineError> {
        let state = &self.state;
        let concurrency = match state.registry.concurrency(workflow) {
            Some(limit) => Some(limit.slot(workflow, input).map_err(EngineError::BadInput)?),
            None => None,
        };
        let plan = state.plans.current(&*state.store).await.of(tenant);
        check_payload_size(tenant, &plan, input)?;
        if let Some(ceiling) = plan.max_queued_runs {
            let usage = state.store.usage(tenant, state.clock.now()).await?;
            if usage.queued >= u64::from(ceiling) {
                return Err(over(
                    tenant,
                    Limit::MaxQueuedRuns,
                    ceiling,
                    Some(QUEUE_RETRY_MS),
                ));
            }
        }
        if let Some(per_minute) = plan.starts_per_minute {
            let now = state.clock.now();
            if let Some(wait) = state
                .transport
                .take(tenant, STARTS, per_minute, now)
                .await?
            {
                return Err(over(tenant, Limit::StartsPerMinute, per_minute, Some(wait)));
            }
        }
        Ok(Admitted {
            counted: plan.max_concurrent_runs.is_some() || concurrency.is_some(),
            concurrency,
        })
    }

    /// Checks a payload (a signal's, a retry's input) of `tenant` against its plan's size.
    pub(super) async fn admit_payload(
        &self,
        tenant: &Namespace,
        payload: &Value,
    ) -> Result<(), EngineError> {
        let state = &self.state;
        let plan = state.plans.current(&*state.store).await.of(tenant);
        check_payload_size(tenant, &plan, payload)
    }
}

fn check_payload_size(tenant: &Namespace, plan: &Plan, payload: &Value) -> Result<(), EngineError> {
    if let Some(ceiling) = plan.max_payload_bytes {
        // Serializing cannot fail for a `Value`; its length is what the store keeps.
        let bytes = serde_json::to_vec(payload).map_or(0, |b| b.len()) as u64;
        if bytes > ceiling {
            return Err(refused(QuotaExceeded {
                tenant: tenant.clone(),
                limit: Limit::MaxPayloadBytes,
                ceiling,
                retry_after_ms: None,
            }));
        }
    }
    Ok(())
}

fn over(
    tenant: &Namespace,
    limit: Limit,
    ceiling: u32,
    retry_after_ms: Option<i64>,
) -> EngineError {
    refused(QuotaExceeded {
        tenant: tenant.clone(),
        limit,
        ceiling: u64::from(ceiling),
        retry_after_ms,
    })
}

/// A start refused by its tenant's plan, counted in the throttling metric.
fn refused(exceeded: QuotaExceeded) -> EngineError {
    crate::metrics::throttled(&exceeded.tenant, exceeded.limit.field());
    EngineError::QuotaExceeded(exceeded)
}
