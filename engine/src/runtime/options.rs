//! How a remote step is run: its retry policy, how long one try may take, and what its worker
//! must be able to do.

use std::time::Duration;

use serde::Serialize;

use crate::model::{Concurrency, RateLimit, RetryPolicy, Saga, StepFlow};

/// Options for [`super::WorkflowContext::step_with`]. A bare [`RetryPolicy`] converts into
/// these, so `ctx.step_with(name, &input, RetryPolicy::none())` reads as it says.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StepOptions {
    /// How failed tries are retried (timeouts included).
    pub retry: RetryPolicy,
    /// How long one try may take before it fails with code `timeout`; `None` waits for as long
    /// as the worker takes (a lost dispatch is still sent again).
    pub timeout: Option<Duration>,
    /// How its dispatches go out:
    /// - `requires`: capabilities a worker must advertise to be sent this step (wire §6.4).
    ///   When the live workers on the step's token announce themselves and none has them all,
    ///   the run parks `blocked` with the reason, and looks again every 5–10 s until one that
    ///   does is live.
    /// - `rate_limit`: at most this many dispatches a minute (per key), for a downstream API's
    ///   rate: a call over it waits, its run parked `blocked` with the reason, until the
    ///   allowance has one.
    /// - `concurrency`: at most this many dispatches out at once (per key), for a downstream
    ///   service that takes so many calls at a time: a call over it waits, its run parked
    ///   `blocked` with the reason, until a dispatch under the same key has its result.
    /// - `priority`: its priority among its step's waiting tasks: higher goes first, and, as
    ///   BullMQ orders a queue (the wire maps it to BullMQ's priority), a task without one goes
    ///   before any with one. Use it to let urgent work of a step pass a backlog of the same
    ///   step.
    pub flow: StepFlow,
    /// The step's part in a saga: the step that undoes it (see
    /// [`StepOptions::compensate_with`]); the engine marks a compensation it runs itself.
    pub saga: Option<Saga>,
    /// The pool of the run's tenant it is sent to, whatever the tenant's routing says (see
    /// [`StepOptions::pool`]).
    pub pool: Option<String>,
}

impl StepOptions {
    /// Options whose step is undone by step `step` with `input` should its run fail, or be
    /// cancelled with compensation, after it completed: the undoing steps of the completed
    /// steps then run newest first, each durable and retried like any step, and the run ends
    /// `compensated` (or `compensation_failed` if one fails for good).
    pub fn compensate_with<I: Serialize + ?Sized>(step: &str, input: &I) -> Self {
        StepOptions::default().compensated_by(step, input)
    }

    /// The same options, undone by step `step` with `input` (see
    /// [`StepOptions::compensate_with`]). An input that cannot be serialised is `null`.
    pub fn compensated_by<I: Serialize + ?Sized>(mut self, step: &str, input: &I) -> Self {
        self.saga = Some(Saga::Undo {
            step: step.to_owned(),
            input: serde_json::to_value(input).unwrap_or(serde_json::Value::Null),
        });
        self
    }

    /// The same options with `retry`.
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// The same options, requiring each of `capabilities` of the worker the step is sent to.
    pub fn requires<S: AsRef<str>>(mut self, capabilities: impl IntoIterator<Item = S>) -> Self {
        self.flow
            .requires
            .extend(capabilities.into_iter().map(|c| c.as_ref().to_owned()));
        self
    }

    /// The same options, dispatched at most as often as `limit` allows
    /// (`RateLimit::per_minute(100).per("/account")`: 100 a minute per account).
    pub fn rate_limit(mut self, limit: RateLimit) -> Self {
        self.flow.rate_limit = Some(limit);
        self
    }

    /// The same options, with at most `limit` dispatches out at once
    /// (`Concurrency::at_most(2).per("/account")`: two at a time per account).
    pub fn concurrency(mut self, limit: Concurrency) -> Self {
        self.flow.concurrency = Some(limit);
        self
    }

    /// The same options with `priority` (higher goes first among the step's waiting tasks).
    pub fn priority(mut self, priority: i64) -> Self {
        self.flow.priority = Some(priority);
        self
    }

    /// The same options, sent to the run's tenant's pool `pool` (its own, or a shared pool
    /// granted to it): the workers of `durable worker --tenant T --pool POOL`, or an SDK worker
    /// on partition `T.POOL`. The author's choice wins over the tenant's routing rules. A name
    /// that is not a pool name fails the step; a pool nobody serves leaves it waiting, as any
    /// step waits for a worker.
    pub fn pool(mut self, pool: &str) -> Self {
        self.pool = Some(pool.to_owned());
        self
    }

    /// The same options with a per-try `timeout`.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }
}

impl From<RetryPolicy> for StepOptions {
    fn from(retry: RetryPolicy) -> Self {
        StepOptions {
            retry,
            ..StepOptions::default()
        }
    }
}
