//! A step's rate limit, applied to a turn's tasks before they are sent (SPEC §8, flow control):
//! each dispatch of a rate-limited step takes one from its tenant's allowance for the step (and
//! key) on the transport, which every control plane shares. A task over the allowance is held
//! back like one the dispatch guard holds: its run parks `blocked` with the reason and looks
//! again when the allowance has one, when the step is planned and sent again. Nothing is failed.

use serde_json::json;

use crate::driver::state::State;
use crate::model::{Millis, RateLimit, RemoteTask, StepFailure};
use crate::store::TurnOutcome;

/// The reason code of a run parked by a step's rate limit.
pub(crate) const RATE_LIMITED: &str = "rate_limited";

/// How long a run whose step cannot name its rate key waits before it is looked at again: only
/// new code (then "continue") or a changed input can give it one.
const NO_KEY_RECHECK_MS: Millis = 60_000;

/// Why a task was held back, and when to look again.
pub(crate) struct RateHold {
    reason: StepFailure,
    recheck_at: Millis,
}

impl RateHold {
    /// How the run parks for this hold, or for `timer` if that is due sooner.
    pub(crate) fn park(self, timer: Option<Millis>) -> TurnOutcome {
        TurnOutcome::Block {
            reason: self.reason,
            recheck_at: Some(timer.map_or(self.recheck_at, |at| at.min(self.recheck_at))),
        }
    }

    /// When to look again.
    pub(crate) fn recheck_at(&self) -> Millis {
        self.recheck_at
    }
}

/// Takes one dispatch of `task` from its step's allowance under `limit` at `now`, or says why
/// it must wait. A transport that cannot count lets it through, with a warning: a rate limit
/// protects a downstream service and must not stop the engine.
pub(crate) async fn take(
    state: &State,
    task: &RemoteTask,
    limit: &RateLimit,
    now: Millis,
) -> Result<(), RateHold> {
    let input = task.input.clone().unwrap_or_default();
    let key = match limit.key(&task.name, &input) {
        Ok(key) => key,
        Err(message) => {
            return Err(RateHold {
                reason: StepFailure::new(message).with_code(RATE_LIMITED),
                recheck_at: now.saturating_add(NO_KEY_RECHECK_MS),
            });
        }
    };
    let (_, tenant) = crate::transport::naming::split_token(&task.group);
    match state
        .transport
        .take(
            &tenant,
            &RateLimit::allowance(&task.name, &key),
            limit.per_minute,
            now,
        )
        .await
    {
        Ok(None) => Ok(()),
        Ok(Some(wait)) => {
            let per = if key.is_empty() {
                String::new()
            } else {
                format!(" for key `{key}`")
            };
            let message = format!(
                "step `{}` is rate limited to {} a minute{per}; it is sent when the allowance has one again",
                task.name, limit.per_minute
            );
            Err(RateHold {
                reason: StepFailure {
                    details: Some(json!({
                        "step": task.name,
                        "key": key,
                        "perMinute": limit.per_minute,
                        "retryAt": now.saturating_add(wait),
                    })),
                    ..StepFailure::new(message).with_code(RATE_LIMITED)
                },
                recheck_at: now.saturating_add(wait),
            })
        }
        Err(e) => {
            tracing::warn!(error = %e, step = task.name, "a step's rate allowance could not be taken; sending it anyway");
            Ok(())
        }
    }
}
