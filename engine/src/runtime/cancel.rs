//! Cancel notices as a worker sees them: the control channel says a run was cancelled, and
//! step handlers of that run find out through [`super::StepContext`].

use std::collections::{HashSet, VecDeque};
use std::sync::{Mutex, MutexGuard};

use tokio::sync::watch;

use crate::model::RunId;

/// How many cancelled run ids a process remembers; the oldest are forgotten first (a step of a
/// run cancelled that long ago has long been told, and the engine drops its result anyway).
const REMEMBERED: usize = 65_536;

/// Runs this process heard were cancelled.
#[derive(Debug)]
pub(crate) struct Cancellations {
    runs: Mutex<Remembered>,
    changed: watch::Sender<u64>,
}

#[derive(Debug, Default)]
struct Remembered {
    set: HashSet<RunId>,
    order: VecDeque<RunId>,
}

impl Default for Cancellations {
    fn default() -> Self {
        Cancellations {
            runs: Mutex::default(),
            changed: watch::channel(0).0,
        }
    }
}

impl Cancellations {
    fn runs(&self) -> MutexGuard<'_, Remembered> {
        self.runs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Notes that `id` was cancelled and wakes every handler waiting on it.
    pub(crate) fn cancel(&self, id: RunId) {
        {
            let mut runs = self.runs();
            if !runs.set.insert(id.clone()) {
                return;
            }
            runs.order.push_back(id);
            while runs.order.len() > REMEMBERED {
                if let Some(old) = runs.order.pop_front() {
                    runs.set.remove(&old);
                }
            }
        }
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Whether `id` was cancelled.
    pub(crate) fn is_cancelled(&self, id: &RunId) -> bool {
        self.runs().set.contains(id)
    }

    /// Resolves once `id` is cancelled (never, if it is not).
    pub(crate) async fn wait(&self, id: &RunId) {
        let mut changed = self.changed.subscribe();
        loop {
            if self.is_cancelled(id) {
                return;
            }
            if changed.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[tokio::test]
    async fn waiters_wake_on_their_run_only() {
        let c = Arc::new(Cancellations::default());
        let a = RunId::parse("a").expect("id");
        let b = RunId::parse("b").expect("id");
        let waiter = tokio::spawn({
            let (c, a) = (c.clone(), a.clone());
            async move { c.wait(&a).await }
        });
        c.cancel(b.clone());
        tokio::task::yield_now().await;
        assert!(
            !waiter.is_finished(),
            "another run's cancel must not wake it"
        );
        c.cancel(a.clone());
        waiter.await.expect("woken");
        assert!(c.is_cancelled(&a) && c.is_cancelled(&b));
    }
}
