//! What the engine measures, through the [`metrics`] facade: a process that installs a recorder
//! (the server's Prometheus exporter) gets these; without one each call is a no-op. Labels are
//! only ever a tenant, a workflow, a step name or a store: never a run id, so the number of
//! series stays bounded by what the code registers.
//!
//! The counts of runs (by status now, started and finished ever) are not here: the store keeps
//! them with every change, and the exporter reads them at each scrape (see
//! [`crate::store::RunReads::run_counts`]).

use std::time::Duration;

use metrics::{Unit, counter, describe_counter, describe_histogram, histogram};

use crate::model::{Checkpoint, Millis, Namespace};

/// A step's run time as the worker that ran it measured it, by tenant, step and outcome.
pub const WORKER_STEP: &str = "durable_worker_step_seconds";
/// A step's run time on its worker (picked up to result recorded), by tenant and step.
pub const STEP_DURATION: &str = "durable_step_duration_seconds";
/// How long a step waited for a worker (dispatched to picked up), by tenant and step.
pub const STEP_QUEUE: &str = "durable_step_queue_seconds";
/// How long a turn took to compute (replay and the workflow's code), by tenant and workflow.
pub const TURN: &str = "durable_turn_seconds";
/// How long a turn's commit took (its write, queueing in the group commit included), by tenant.
pub const COMMIT: &str = "durable_commit_seconds";
/// How many writes one group commit carried, by store.
pub const BATCH: &str = "durable_commit_batch_size";
/// Store calls that failed (the database refused or was unreachable), by store.
pub const STORE_ERRORS: &str = "durable_store_errors_total";
/// Transport calls that failed (Redis refused or was unreachable), by transport.
pub const TRANSPORT_ERRORS: &str = "durable_transport_errors_total";
/// Starts refused by a tenant's plan (a quota or a ceiling), by tenant and limit.
pub const THROTTLED: &str = "durable_throttled_total";

/// The buckets of the latency histograms, in seconds: 1 ms to a minute (the dashboard's stored
/// minutes use the same ones).
pub use crate::model::LATENCY_BUCKETS;

/// The buckets of the batch-size histogram.
pub const BATCH_BUCKETS: [f64; 9] = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0];

/// Registers the help text and unit of every metric here, once the recorder is installed.
pub fn describe() {
    describe_histogram!(
        STEP_DURATION,
        Unit::Seconds,
        "A step's run time on its worker, from pick-up to its recorded result."
    );
    describe_histogram!(
        STEP_QUEUE,
        Unit::Seconds,
        "How long a step waited for a worker, from dispatch to pick-up."
    );
    describe_histogram!(
        WORKER_STEP,
        Unit::Seconds,
        "A step's run time as the worker that ran it measured it (this process's steps)."
    );
    describe_histogram!(
        TURN,
        Unit::Seconds,
        "How long a turn took to compute: replay and the workflow's code."
    );
    describe_histogram!(
        COMMIT,
        Unit::Seconds,
        "How long a turn's commit took, queueing in the group commit included."
    );
    describe_histogram!(
        BATCH,
        Unit::Count,
        "How many writes one group commit carried."
    );
    describe_counter!(STORE_ERRORS, "Store calls that failed.");
    describe_counter!(TRANSPORT_ERRORS, "Transport (Redis) calls that failed.");
    describe_counter!(THROTTLED, "Starts refused by a tenant's plan, by limit.");
}

/// A step's name and times as its checkpoint records them: what its metrics are made of.
#[derive(Clone, Debug)]
pub(crate) struct StepTimes {
    pub name: String,
    pub enqueued_at: Option<Millis>,
    pub started_at: Option<Millis>,
    pub finished_at: Option<Millis>,
}

impl From<&Checkpoint> for StepTimes {
    fn from(cp: &Checkpoint) -> Self {
        StepTimes {
            name: cp.name.clone(),
            enqueued_at: cp.enqueued_at,
            started_at: cp.started_at,
            finished_at: cp.finished_at,
        }
    }
}

/// A step of `tenant` whose result was recorded: its run time and its wait for a worker (a
/// time not known leaves its histogram out).
pub(crate) fn step_finished(tenant: &Namespace, step: &StepTimes) {
    let labels = [("tenant", tenant.to_string()), ("step", step.name.clone())];
    if let (Some(start), Some(end)) = (step.started_at, step.finished_at) {
        histogram!(STEP_DURATION, &labels).record(seconds(end.saturating_sub(start)));
    }
    if let (Some(queued), Some(start)) = (step.enqueued_at, step.started_at) {
        histogram!(STEP_QUEUE, &labels).record(seconds(start.saturating_sub(queued)));
    }
}

/// A step of `tenant` this process's worker ran in `took`, to `outcome` (`completed`,
/// `failed`).
pub(crate) fn worker_step(tenant: &str, step: &str, outcome: &'static str, took: Duration) {
    let labels = [
        ("tenant", tenant.to_owned()),
        ("step", step.to_owned()),
        ("outcome", outcome.to_owned()),
    ];
    histogram!(WORKER_STEP, &labels).record(took.as_secs_f64());
}

/// A turn of a run of `workflow` computed in `took`.
pub(crate) fn turn_computed(tenant: &Namespace, workflow: &str, took: Duration) {
    let labels = [
        ("tenant", tenant.to_string()),
        ("workflow", workflow.to_owned()),
    ];
    histogram!(TURN, &labels).record(took.as_secs_f64());
}

/// A turn's commit of `tenant` written in `took`.
pub(crate) fn committed(tenant: &Namespace, took: Duration) {
    histogram!(COMMIT, "tenant" => tenant.to_string()).record(took.as_secs_f64());
}

/// A group commit of `store` that carried `writes`.
pub(crate) fn batch_written(store: &'static str, writes: usize) {
    histogram!(BATCH, "store" => store).record(writes as f64);
}

/// A call to `store` that failed.
pub(crate) fn store_error(store: &'static str) {
    counter!(STORE_ERRORS, "store" => store).increment(1);
}

/// A call to `transport` that failed.
pub(crate) fn transport_error(transport: &'static str) {
    counter!(TRANSPORT_ERRORS, "transport" => transport).increment(1);
}

/// A start of `tenant` refused by its plan's `limit`.
pub(crate) fn throttled(tenant: &Namespace, limit: &'static str) {
    counter!(THROTTLED, "tenant" => tenant.to_string(), "limit" => limit).increment(1);
}

/// Milliseconds as seconds; a clock that went back counts as zero.
fn seconds(ms: Millis) -> f64 {
    ms.max(0) as f64 / 1000.0
}
