//! What the redispatch loop remembers between its rounds: which remote steps' jobs were found
//! gone from the broker, and since when.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::model::{Millis, RunId};

/// The tries of remote steps whose job a look found gone from the broker, with when a look
/// first found it so (see [`super::loops::redispatch`]). In memory: a control plane that
/// restarts looks once more before sending, and a peer that looks next does too.
#[derive(Default)]
pub(crate) struct VanishedJobs(Mutex<HashMap<(RunId, u32, u32), Millis>>);

impl VanishedJobs {
    /// Notes that a look at `now` found the job of try `attempt` of step `seq` of `run` gone;
    /// whether a look at least `window` earlier found it gone too.
    pub(crate) fn gone_since(&self, key: (RunId, u32, u32), now: Millis, window: Millis) -> bool {
        let mut seen = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let first = *seen.entry(key.clone()).or_insert(now);
        let due = now - first >= window;
        if due {
            seen.remove(&key);
        }
        due
    }

    /// Forgets the notes no look renewed for a while: their steps got a result or moved on
    /// (a step still waiting is looked at every window). Once per round, not per look.
    pub(crate) fn prune(&self, now: Millis, window: Millis) {
        let mut seen = self.0.lock().unwrap_or_else(|p| p.into_inner());
        seen.retain(|_, first| now - *first < 4 * window);
    }

    /// Forgets what was noted of a try whose job a look found queued or running.
    pub(crate) fn forget(&self, key: &(RunId, u32, u32)) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_is_due_again_only_once_gone_a_whole_window() {
        let vanished = VanishedJobs::default();
        let key = |seq| (RunId::parse("run_1").expect("id"), seq, 1);
        assert!(!vanished.gone_since(key(0), 1_000, 30_000), "first look");
        assert!(
            !vanished.gone_since(key(0), 30_999, 30_000),
            "not a window yet"
        );
        assert!(
            vanished.gone_since(key(0), 31_000, 30_000),
            "a window later"
        );
        // Sent again: a later loss of the same try is a new story.
        assert!(!vanished.gone_since(key(0), 31_000, 30_000));
        // A look that finds the job queued forgets the first one.
        assert!(!vanished.gone_since(key(1), 1_000, 30_000));
        vanished.forget(&key(1));
        assert!(!vanished.gone_since(key(1), 40_000, 30_000));
        // A note nobody looked at again for long goes.
        assert!(!vanished.gone_since(key(2), 1_000, 30_000));
        vanished.prune(200_000, 30_000);
        assert!(
            !vanished.gone_since(key(2), 200_000, 30_000),
            "forgotten: a first look again"
        );
    }
}
