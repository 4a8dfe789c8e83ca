//! The dispatch guard (aviary wire §6.4), applied to a turn's commit before it is written: a
//! step whose token has live workers that announced themselves, none of them able to take it
//! (a capability it requires is missing, or they speak another protocol), is not queued where
//! it would wait forever. The run parks `blocked` with the reason and looks again after
//! [`RECHECK`] (or at its next timer, if sooner); the turn's other effects (local steps it ran,
//! timers, steps that can go) are kept, and results of steps still out are recorded while it is
//! parked.

use std::time::Duration;

use super::shared::Shared;
use crate::model::{Incompatibility, Millis, Protocol, RemoteTask, check_dispatch};
use crate::store::{TurnCommit, TurnOutcome};

/// How long a run parked by the guard waits before its next turn looks again.
pub(crate) const RECHECK: Duration = Duration::from_secs(5);

/// A task a turn sends, with what its worker must be able to do.
pub(crate) struct Outgoing {
    pub task: RemoteTask,
    pub requires: Vec<String>,
}

/// Keeps the tasks of `outgoing` a live worker can take, and takes the others out of `commit`
/// (their checkpoints, or their redispatch). If any was held back while the run would suspend,
/// the run parks `blocked` with the first reason (see [`park`]).
pub(crate) async fn screen(
    shared: &Shared,
    commit: &mut TurnCommit,
    outgoing: Vec<Outgoing>,
    now: Millis,
) -> Vec<RemoteTask> {
    let mut sent = Vec::with_capacity(outgoing.len());
    let mut held: Option<Incompatibility> = None;
    for Outgoing { task, requires } in outgoing {
        match admits(shared, &task.group, &requires).await {
            Ok(()) => sent.push(task),
            Err(why) => {
                tracing::info!(run_id = %task.run_id, seq = task.seq, token = task.group, reason = %why.reason(), "step held back: no live worker can take it");
                commit.checkpoints.retain(|c| c.seq != task.seq);
                commit.redispatched.retain(|seq| *seq != task.seq);
                held.get_or_insert(why);
            }
        }
    }
    if let (Some(why), TurnOutcome::Suspend { wake_at }) = (held, &commit.outcome) {
        commit.outcome = park(&why, now, *wake_at);
    }
    sent
}

/// Whether a live worker on `token` can take work requiring `requires`. A transport that
/// cannot say which workers are live lets it through, as one with no announcements.
pub(crate) async fn admits(
    shared: &Shared,
    token: &str,
    requires: &[String],
) -> Result<(), Incompatibility> {
    let live = shared
        .transport
        .worker_descriptors(token)
        .await
        .unwrap_or_else(|e| {
            tracing::debug!(error = %e, token, "worker descriptors unreadable; dispatching as to workers that announce nothing");
            Vec::new()
        });
    check_dispatch(token, requires, &live, &Protocol::default())
}

/// How a run parks for `why`: until the recheck, or until `timer` if that is due sooner.
pub(crate) fn park(why: &Incompatibility, now: Millis, timer: Option<Millis>) -> TurnOutcome {
    let recheck = now.saturating_add(RECHECK.as_millis() as Millis);
    TurnOutcome::Block {
        reason: why.to_failure(),
        recheck_at: Some(timer.map_or(recheck, |at| at.min(recheck))),
    }
}
