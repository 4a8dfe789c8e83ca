//! The dispatch guard (aviary wire §6.4), applied with the flow limits of [`flow`] to a turn's
//! commit before it is written: a step whose token has live workers that announced themselves,
//! none of them able to take it (a capability it requires is missing, or they speak another
//! protocol), is not queued where it would wait forever. The run parks `blocked` with the
//! reason and looks again after [`super::backoff::RECHECK`], then after as long as it has been parked
//! for that reason, at most [`super::backoff::MAX_RECHECK`] (or at its next timer, if sooner): a run waiting for a worker
//! nobody starts costs a turn a minute, not one every few seconds, and "continue" looks again at
//! once. The sweep looks again sooner when a worker that can take the work announces itself on
//! the token ([`capable_worker_live`], [`parked_for`]). The turn's other effects (local steps it
//! ran, timers, steps that can go) are kept, and results of steps still out are recorded while
//! it is parked.

use super::backoff::backing_off;
use super::flow;
use crate::driver::routing;
use crate::driver::state::State;
use crate::model::{
    Incompatibility, Millis, Partition, PoolName, Protocol, RemoteTask, StepFailure, StepFlow,
    StepRoute, check_dispatch, parked_by_guard,
};
use crate::store::{TurnCommit, TurnOutcome};
use crate::transport::naming::{partition_token, token_tenant};

/// A task a turn sends, with how it goes out: what its worker must be able to do, how often it
/// may go and how many of its step may be out at once.
pub(crate) struct Outgoing {
    pub task: RemoteTask,
    pub flow: StepFlow,
    /// Where it was routed and why (kept on its checkpoint), if anything chose.
    pub route: Option<StepRoute>,
    /// The pools its rule falls back to while the first has no live worker.
    pub fallbacks: Vec<PoolName>,
}

/// Keeps the tasks of `outgoing` a live worker can take and their flow limits let go (see
/// [`flow`]: a slot of the step's concurrency limit, then one of its rate), and takes the
/// others out of `commit` (their checkpoints, or their redispatch). A slot taken is noted on
/// the step's checkpoint, whose result gives it back. If any task was held back while the run
/// would suspend, the run parks `blocked`: for the first worker it lacks (see [`park`];
/// `before` is the run's reason until now), else for the first limit, looking again when the
/// soonest hold may pass.
pub(crate) async fn screen(
    state: &State,
    commit: &mut TurnCommit,
    outgoing: Vec<Outgoing>,
    before: Option<&StepFailure>,
    now: Millis,
) -> Vec<RemoteTask> {
    let mut sent = Vec::with_capacity(outgoing.len());
    let mut held: Option<Incompatibility> = None;
    let mut limited: Option<flow::Hold> = None;
    let mut soonest = Millis::MAX;
    for Outgoing {
        mut task,
        flow,
        route,
        fallbacks,
    } in outgoing
    {
        if !fallbacks.is_empty() {
            fall_back(state, commit, &mut task, route, &fallbacks, &flow.requires).await;
        }
        let pass = match admits(state, &task.group, &flow.requires).await {
            Ok(()) => flow_allows(state, commit, &task, &flow, before, now)
                .await
                .map_err(|hold| {
                    soonest = soonest.min(hold.recheck_at());
                    limited.get_or_insert(hold);
                }),
            Err(why) => {
                tracing::info!(run_id = %task.run_id, seq = task.seq, token = task.group, reason = %why.reason(), "step held back: no live worker can take it");
                held.get_or_insert(why);
                Err(())
            }
        };
        if pass.is_ok() {
            sent.push(task);
        } else {
            commit.checkpoints.retain(|c| c.seq != task.seq);
            commit.redispatched.retain(|sent| sent.seq != task.seq);
        }
    }
    if let TurnOutcome::Suspend { wake_at } = &commit.outcome {
        // A worker-less step parks; a limited one beside it still wakes the run in time.
        let flow_due = (soonest < Millis::MAX).then_some(soonest);
        let timer = [*wake_at, flow_due].into_iter().flatten().min();
        if let Some(why) = held {
            commit.outcome = park(&why, before, now, timer);
        } else if let Some(hold) = limited {
            commit.outcome = hold.park(timer);
        }
    }
    sent
}

/// Whether `task`'s flow limits let it go now: a slot of its step's `concurrency` limit (noted
/// on its checkpoint in `commit`), then one of its `rate_limit`; a slot taken for a task the
/// rate then holds back is given back.
async fn flow_allows(
    state: &State,
    commit: &mut TurnCommit,
    task: &RemoteTask,
    limits: &StepFlow,
    before: Option<&StepFailure>,
    now: Millis,
) -> Result<(), flow::Hold> {
    let slot = match &limits.concurrency {
        Some(limit) => flow::acquire(state, task, limit, before, now).await?,
        None => None,
    };
    if let Some(limit) = &limits.rate_limit
        && let Err(hold) = flow::take(state, task, limit, now).await
    {
        if let Some(slot) = slot {
            flow::give_back(state, slot).await;
        }
        return Err(hold);
    }
    if let Some(slot) = slot
        && let Some(cp) = commit.checkpoints.iter_mut().find(|c| c.seq == task.seq)
    {
        cp.slot = Some(slot.counter);
    }
    Ok(())
}

/// Whether a live worker on `token` can take work requiring `requires`. A transport that
/// cannot say which workers are live lets it through, as one with no announcements.
pub(crate) async fn admits(
    state: &State,
    token: &str,
    requires: &[String],
) -> Result<(), Incompatibility> {
    let live = state
        .transport
        .worker_descriptors(token)
        .await
        .unwrap_or_else(|e| {
            tracing::debug!(error = %e, token, "worker descriptors unreadable; dispatching as to workers that announce nothing");
            Vec::new()
        });
    check_dispatch(token, requires, &live, &Protocol::default())
}

/// Sends `task` (routed as `route`) to the first of `fallbacks` with a live worker able to take
/// it, when none on its own token can: the task and its checkpoint in `commit` are rewritten,
/// and the route says which pool it stood in for. With no live worker anywhere it stays.
async fn fall_back(
    state: &State,
    commit: &mut TurnCommit,
    task: &mut RemoteTask,
    route: Option<StepRoute>,
    fallbacks: &[PoolName],
    requires: &[String],
) {
    if capable_worker_live(state, &task.group, requires).await {
        return;
    }
    let tenant = token_tenant(&task.group);
    let live = |token: String| async move { capable_worker_live(state, &token, requires).await };
    let Some(pool) = routing::fall_back(&tenant, &task.name, fallbacks, live).await else {
        return;
    };
    let partition = Partition::of_pool(tenant, pool.clone());
    task.group = partition_token(&task.name, &partition);
    let route = route.map(|route| StepRoute {
        instead_of: route.pool,
        pool: Some(pool),
        ..route
    });
    if let Some(cp) = commit.checkpoints.iter_mut().find(|c| c.seq == task.seq) {
        cp.worker_group = Some(task.group.clone());
        cp.route = route.clone();
    }
    if let Some(sent) = commit.redispatched.iter_mut().find(|r| r.seq == task.seq) {
        sent.worker_group = task.group.clone();
        sent.route = route;
    }
}

/// Whether a live worker that announced itself on `token` can take work requiring `requires`.
/// Stricter than [`admits`], which also lets work through to a token where nobody announced
/// anything: this is whether a worker able to take it is there now.
pub(crate) async fn capable_worker_live(state: &State, token: &str, requires: &[String]) -> bool {
    let live = state
        .transport
        .worker_descriptors(token)
        .await
        .unwrap_or_default();
    !live.is_empty() && check_dispatch(token, requires, &live, &Protocol::default()).is_ok()
}

/// The token and the requirements of the work the guard parked a run for, read from the
/// run's reason (see [`park`]); `None` for a run parked for anything else.
pub(crate) fn parked_for(reason: &StepFailure) -> Option<(String, Vec<String>)> {
    if !parked_by_guard(reason) {
        return None;
    }
    let details = reason.details.as_ref()?;
    let token = details.get("token")?.as_str()?.to_owned();
    let requires = details
        .get("requires")
        .and_then(serde_json::Value::as_array)
        .map(|all| {
            all.iter()
                .filter_map(|c| c.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    Some((token, requires))
}

/// How a run whose reason until now is `before` parks for `why`: until the recheck, or until
/// `timer` if that is due sooner (see [`backing_off`]).
pub(crate) fn park(
    why: &Incompatibility,
    before: Option<&StepFailure>,
    now: Millis,
    timer: Option<Millis>,
) -> TurnOutcome {
    let (reason, recheck) = backing_off(why.to_failure(), before, now);
    TurnOutcome::Block {
        reason,
        recheck_at: Some(timer.map_or(recheck, |at| at.min(recheck))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::turn::backoff::BLOCKED_SINCE;

    fn missing(capability: &str) -> Incompatibility {
        Incompatibility::MissingCapability {
            token: "geocode@acme".into(),
            requires: vec![capability.into()],
            missing: vec![capability.into()],
            live: 1,
        }
    }

    fn parked(outcome: TurnOutcome) -> (StepFailure, Millis) {
        match outcome {
            TurnOutcome::Block {
                reason,
                recheck_at: Some(at),
            } => (reason, at),
            other => panic!("not parked with a recheck: {other:?}"),
        }
    }

    #[test]
    fn the_reason_says_what_the_run_was_parked_for() {
        let reason = missing("geo-v2").to_failure();
        assert_eq!(
            parked_for(&reason),
            Some(("geocode@acme".into(), vec!["geo-v2".into()]))
        );
        let unserved =
            StepFailure::new("no worker serves workflow `x` version 2").with_code("no_worker");
        assert_eq!(parked_for(&unserved), None);
    }

    #[test]
    fn a_run_parked_longer_looks_again_less_often() {
        let why = missing("geo-v2");
        let (first, at) = parked(park(&why, None, 1_000, None));
        assert_eq!(at, 6_000, "the first look comes after RECHECK");
        let details = first.details.as_ref().expect("details");
        assert_eq!(details[BLOCKED_SINCE], 1_000);
        // Parked again 5 s, 40 s and 10 minutes on: it waits as long as it has been parked, up
        // to a minute; the reason is unchanged, so the parks are not news.
        for (now, wait) in [(6_000, 5_000), (41_000, 40_000), (601_000, 60_000)] {
            let (again, at) = parked(park(&why, Some(&first), now, None));
            assert_eq!(at - now, wait, "at {now}");
            assert_eq!(again, first);
        }
        // A timer due sooner still wins.
        let (_, at) = parked(park(&why, Some(&first), 601_000, Some(602_000)));
        assert_eq!(at, 602_000);
        // Another reason, or none (after "continue"), starts over.
        let (other, at) = parked(park(&missing("geo-v3"), Some(&first), 601_000, None));
        assert_eq!(at, 606_000);
        assert_eq!(other.details.expect("details")[BLOCKED_SINCE], 601_000);
        let (_, at) = parked(park(&why, None, 601_000, None));
        assert_eq!(at, 606_000);
    }
}
