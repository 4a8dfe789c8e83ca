//! How long a parked run waits before its next turn looks again: a run held back by the
//! dispatch guard ([`super::guard`]) or a flow limit ([`super::flow`]) looks again soon at
//! first, then as long as it has been parked for the same reason, so a long wait costs a turn a
//! minute.

use std::time::Duration;

use crate::model::{Millis, StepFailure};

/// How long a parked run waits before its next turn looks again, at first.
pub(crate) const RECHECK: Duration = Duration::from_secs(5);

/// The longest a parked run waits between two looks.
pub(crate) const MAX_RECHECK: Duration = Duration::from_secs(60);

/// The detail of a parked run's reason that says since when it has been parked for it.
pub(super) const BLOCKED_SINCE: &str = "blockedSince";

/// `reason` (whose details are an object) marked with since when the run has been parked for
/// it, and when it looks again: parked again for the same reason as `before`, it keeps the time
/// it was first parked, and waits as long as it has been parked since (between [`RECHECK`] and
/// [`MAX_RECHECK`]), so a long wait costs a turn a minute.
pub(crate) fn backing_off(
    mut reason: StepFailure,
    before: Option<&StepFailure>,
    now: Millis,
) -> (StepFailure, Millis) {
    let since = blocked_since(before, &reason).unwrap_or(now);
    if let Some(serde_json::Value::Object(details)) = &mut reason.details {
        details.insert(BLOCKED_SINCE.into(), since.into());
    }
    let wait = now.saturating_sub(since).clamp(
        RECHECK.as_millis() as Millis,
        MAX_RECHECK.as_millis() as Millis,
    );
    (reason, now.saturating_add(wait))
}

/// Since when a run parked for `before` has been parked, if `reason` is the same one.
fn blocked_since(before: Option<&StepFailure>, reason: &StepFailure) -> Option<Millis> {
    let before = before.filter(|b| b.code == reason.code && b.message == reason.message)?;
    before.details.as_ref()?.get(BLOCKED_SINCE)?.as_i64()
}
