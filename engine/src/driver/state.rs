//! What every loop and stage of one engine shares: its store, transport, code, clock and
//! configuration, the turn slots, the claim loop's wake-up, and the per-engine memory the fast
//! path and remote turns keep.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, Ordering};
use std::time::Duration;

use tokio::sync::{Notify, mpsc};
use tokio::time::Instant;

use super::config::EngineConfig;
use super::definitions::DefinitionBook;
use super::fast_path::{InFlight, ParkedRuns};
use super::plans::PlanBook;
use super::publisher::Publisher;
use super::step_tallies::StepTallies;
use super::turn::awaiting::Awaiting;
use super::vanished_jobs::VanishedJobs;
use crate::fair::{Lane, Shares, Slot};
use crate::metrics::StepTimes;
use crate::model::{
    ControlMessage, ControlNotice, Millis, Namespace, Run, RunId, Scope, StepResult, TenantEvent,
    TenantEventKind,
};
use crate::runtime::{Clock, Registry};
use crate::store::{Claim, Store, StoreResult};
use crate::transport::Transport;

/// What every loop of one engine shares.
pub(crate) struct State {
    pub store: Arc<dyn Store>,
    pub transport: Arc<dyn Transport>,
    pub registry: Arc<Registry>,
    pub clock: Arc<dyn Clock>,
    pub config: EngineConfig,
    /// The namespaces this engine drives.
    pub scope: Scope,
    /// Poked when a run may have become runnable, so the claim loop does not wait for its tick.
    pub wake: Notify,
    /// Poked when a schedule was created or changed here, so the ticker looks again at once.
    pub schedules_changed: Notify,
    /// When the idle claim loop will next look (epoch ms), so a turn that suspends a run
    /// until sooner can poke it.
    planned_wake: AtomicI64,
    /// One per turn that may execute at once, shared between tenants by weight; every turn
    /// holds one, so waiting for them all waits for every turn to finish.
    pub turns: Arc<Shares>,
    /// Whether the engine's loops run: only then may a start or a result claim a run directly
    /// (someone must run the turn it then owes).
    accepting: AtomicBool,
    /// Whether the store's last heartbeat showed no other live driver (see
    /// [`State::alone`]).
    alone: AtomicBool,
    peers: AtomicU32,
    /// Runs this engine last suspended, for the sticky fast path.
    pub parked: ParkedRuns,
    /// Runs this engine is working on (turning, their leases renewed, or applying a result),
    /// with the results that arrived for them meanwhile.
    pub in_flight: InFlight,
    /// Where results held for a run while this engine worked on it go back to the results
    /// loop: each was taken off the broker, so dropping it would run its step again.
    requeued: mpsc::UnboundedSender<Vec<StepResult>>,
    /// Remote workflow turns sent and not yet decided.
    pub awaiting: Awaiting,
    /// Where tenant events leave.
    events: Publisher,
    /// The tenants' plans: ceilings and weights.
    pub plans: PlanBook,
    /// The tenants' routing definitions (their pools), for the turns whose code names a pool.
    pub definitions: DefinitionBook,
    /// Step run times recorded here and not yet added to the store's activity minutes.
    pub step_tallies: StepTallies,
    /// Steps with no result whose jobs the redispatch loop found gone from the broker.
    pub vanished: VanishedJobs,
}

impl State {
    /// The state of an engine whose held results go back to the results loop on `requeued`.
    pub fn new(
        store: Arc<dyn Store>,
        transport: Arc<dyn Transport>,
        registry: Arc<Registry>,
        clock: Arc<dyn Clock>,
        config: EngineConfig,
        requeued: mpsc::UnboundedSender<Vec<StepResult>>,
    ) -> Self {
        let scope = match &config.namespace {
            Some(ns) => Scope::Only(ns.clone()),
            None => Scope::All,
        };
        State {
            store,
            events: Publisher::new(transport.clone()),
            transport,
            registry,
            clock,
            scope,
            wake: Notify::new(),
            schedules_changed: Notify::new(),
            planned_wake: AtomicI64::new(Millis::MAX),
            turns: Arc::new(Shares::new(config.max_concurrent_turns)),
            accepting: AtomicBool::new(false),
            alone: AtomicBool::new(false),
            peers: AtomicU32::new(0),
            parked: ParkedRuns::default(),
            in_flight: InFlight::default(),
            requeued,
            awaiting: Awaiting::default(),
            plans: PlanBook::default(),
            definitions: DefinitionBook::default(),
            step_tallies: StepTallies::default(),
            vanished: VanishedJobs::default(),
            config,
        }
    }

    /// This engine's lease, from now.
    pub fn claim(&self) -> Claim {
        Claim {
            scope: self.scope.clone(),
            owner: self.config.owner.clone(),
            until: self.clock.now() + self.config.lease.as_millis() as i64,
        }
    }

    /// A turn slot for a run of `tenant` claimed directly (by its start or its result), if one
    /// is free, the tenant is below its share or alone in wanting one (see [`Shares`]), and the
    /// engine is running; otherwise the claim loop picks the run up, fairly.
    pub fn try_turn_slot(&self, tenant: &Namespace) -> Option<Slot> {
        let slot = self
            .turns
            .try_take(tenant, self.plans.last_weight(tenant))?;
        // Checked after taking the slot: shutdown clears the flag, then waits for every slot.
        self.is_accepting().then_some(slot)
    }

    /// [`State::try_turn_slot`] for a run whose tenant is not known yet: only while no tenant
    /// waits for a slot. Hand it to the tenant once known ([`Slot::hand_to`]).
    pub fn try_unplaced_turn_slot(&self) -> Option<Slot> {
        let slot = self.turns.try_take_unplaced()?;
        self.is_accepting().then_some(slot)
    }

    /// The lane a write of `tenant`'s `workflow` waits in where the store queues writes (a
    /// start, a turn's commit, a step's result; see [`crate::fair::Lane`]).
    pub fn lane(&self, tenant: &Namespace, workflow: &str) -> Lane {
        Lane {
            tenant: tenant.clone(),
            key: workflow.to_owned(),
            weight: self.plans.last_weight(tenant),
        }
    }

    /// Whether the engine is running (not stopped or stopping).
    pub fn is_accepting(&self) -> bool {
        self.accepting.load(Ordering::SeqCst)
    }

    /// Lets starts and results claim runs directly (or stops them, at shutdown).
    pub fn set_accepting(&self, on: bool) {
        self.accepting.store(on, Ordering::SeqCst);
    }

    /// Whether no other control plane shares the store, as of the last heartbeat; until the
    /// store has said, a peer is assumed. Alone, a turn's new steps may leave before its commit
    /// (see [`super::fast_path::in_flight`]): with a peer, a result that leaves the sender's queue (an SDK
    /// worker's, say) may reach the peer ahead of the commit, and a turn the store refuses
    /// because a peer moved the run would have sent its steps for nothing.
    pub fn alone(&self) -> bool {
        self.alone.load(Ordering::Relaxed)
    }

    /// Notes how many other live drivers the store reported, or that it could not say.
    pub fn note_peers(&self, peers: Option<u32>) {
        self.alone.store(peers == Some(0), Ordering::Relaxed);
        self.peers.store(peers.unwrap_or(0), Ordering::Relaxed);
    }

    /// How many other live control planes the store reported at the last heartbeat (0 until it
    /// has, or when it could not say).
    pub fn peers(&self) -> u32 {
        self.peers.load(Ordering::Relaxed)
    }

    /// Tells the claim loop a run of `tenant` went on record waiting for it: it wakes the loop
    /// if idle, and makes a busy loop that trusts an older read of the backlog read again if
    /// that read held every run of `tenant` (see [`Shares::note_arrival`]).
    pub fn queued(&self, tenant: &Namespace) {
        self.turns
            .note_arrival(tenant, self.plans.last_weight(tenant));
        self.wake.notify_one();
    }

    /// Notes when the idle claim loop will next look.
    pub fn plan_wake(&self, at: Millis) {
        self.planned_wake.store(at, Ordering::SeqCst);
    }

    /// Pokes the claim loop if `at` is sooner than it planned to look.
    pub fn wake_by(&self, at: Millis) {
        if at < self.planned_wake.load(Ordering::SeqCst) {
            self.wake.notify_one();
        }
    }

    /// Waits until the engine's clock reaches `at`, or the wall clock reaches `poll_at`,
    /// whichever comes first. Every loop that waits for something to come due waits here.
    ///
    /// Two clocks, because a loop looks for two kinds of thing. What comes due in engine time
    /// (a timer, a backoff, a step timeout, a lease or a heartbeat that lapses) is compared
    /// with [`State::clock`], so the wait is on that clock: a test that advances its
    /// [`crate::runtime::TestClock`] wakes the loop at once. What another process does (a run
    /// it started, a peer that joins or stops, a worker that announces itself) pokes no one
    /// here and is found only by looking again; the world moves at the wall clock's pace
    /// whatever the engine's clock says, so that polling keeps its wall-clock pace, and a test
    /// clock standing still does not stop the engine seeing it. With the
    /// [`crate::runtime::SystemClock`] both arms are the same wall clock, and the wait is what
    /// a single sleep was: until the earlier of the two.
    pub async fn wait_until(&self, at: Millis, poll_at: Instant) {
        tokio::select! {
            () = self.clock.sleep_until(at) => {}
            () = tokio::time::sleep_until(poll_at) => {}
        }
    }

    /// A loop's round: [`State::wait_until`] `every` from now on both clocks.
    pub async fn pace(&self, every: Duration) {
        let at = self.clock.now().saturating_add(millis(every));
        self.wait_until(at, Instant::now() + every).await;
    }

    /// A step of `tenant` whose result was recorded: its metrics, and its run time in the
    /// activity minutes.
    pub fn step_finished(&self, tenant: &Namespace, step: &StepTimes) {
        crate::metrics::step_finished(tenant, step);
        self.step_tallies.record(tenant, step);
    }

    /// Adds the step run times counted so far to the store's activity minutes; what the store
    /// refuses is kept for the next call.
    pub async fn add_step_tallies(&self) -> StoreResult<()> {
        let tallies = self.step_tallies.take();
        if tallies.is_empty() {
            return Ok(());
        }
        let added = self.store.add_step_tallies(&tallies).await;
        if added.is_err() {
            self.step_tallies.restore(tallies, self.clock.now());
        }
        added
    }

    /// Hands results held for one run back to the results loop, which applies them in order.
    pub fn requeue(&self, held: Vec<StepResult>) {
        if held.is_empty() {
            return;
        }
        if self.requeued.send(held).is_err() {
            // Only once the engine is dropped: nothing is left to apply them.
            tracing::warn!(
                "dropped held step results: the engine is gone; their steps are redispatched"
            );
        }
    }

    /// Waits until no turn is executing.
    pub async fn turns_finished(&self) {
        self.turns.all_free().await;
    }

    /// Tells every worker on the control channel that run `id` was cancelled, so its in-flight
    /// steps can stop. Only a hint (results of a cancelled run are dropped anyway), so a
    /// transport error is logged, not raised.
    pub async fn announce_cancel(&self, id: &RunId) {
        let message = ControlMessage {
            from: Some(self.config.owner.clone()),
            notice: ControlNotice::Cancel { run_id: id.clone() },
        };
        if let Err(e) = self.transport.publish_control(message).await {
            tracing::warn!(run_id = %id, error = %e, "could not announce a cancellation");
        }
    }

    /// Publishes the run's current status to its tenant, without waiting for the broker (see
    /// [`Publisher`]).
    pub fn emit(&self, run: &Run, kind: TenantEventKind, seq: Option<u32>) {
        tracing::debug!(
            tenant = %run.namespace,
            run_id = %run.id,
            workflow = %run.workflow,
            status = %run.status,
            "run moved"
        );
        let event = TenantEvent {
            kind,
            namespace: run.namespace.clone(),
            run_id: run.id.clone(),
            workflow: run.workflow.clone(),
            status: run.status,
            seq,
            at: self.clock.now(),
        };
        self.events.publish(event);
    }
}

/// `d` in engine-time milliseconds.
pub(crate) fn millis(d: Duration) -> Millis {
    Millis::try_from(d.as_millis()).unwrap_or(Millis::MAX)
}
