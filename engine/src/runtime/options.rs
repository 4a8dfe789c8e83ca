//! How a remote step is run: its retry policy and how long one try may take.

use std::time::Duration;

use crate::model::RetryPolicy;

/// Options for [`super::WorkflowContext::step_with`]. A bare [`RetryPolicy`] converts into
/// these, so `ctx.step_with(name, &input, RetryPolicy::none())` reads as it says.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StepOptions {
    /// How failed tries are retried (timeouts included).
    pub retry: RetryPolicy,
    /// How long one try may take before it fails with code `timeout`; `None` waits for as long
    /// as the worker takes (a lost dispatch is still sent again).
    pub timeout: Option<Duration>,
}

impl StepOptions {
    /// The same options with `retry`.
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
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
            timeout: None,
        }
    }
}
