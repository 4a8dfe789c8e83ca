//! `durable.http`: a call to a tenant's downstream HTTP API through one of its connections. The
//! connection gives the base URL and the headers (its secret ones included, which never pass
//! through the run's history); the step's input gives the method, the path under the base URL,
//! the query, extra headers and a JSON body. The response's status, headers and body (JSON when
//! it parses, else text) are the step's output. A 5xx, a 408 or 429, a timeout or a broken
//! connection fail the attempt so the step's retry policy tries again; any other 4xx fails the
//! step at once. Addresses are checked first ([`egress`]).

mod call;
pub mod egress;

use std::sync::Arc;
use std::time::Duration;

pub use call::{HttpCall, HttpReply};
pub use egress::{CONNECTION_ALLOW_ENV, EgressError, EgressPolicy, GuardedResolver};

use crate::runtime::{Registry, StepContext, StepError};

/// The step's name.
pub const HTTP_STEP: &str = "durable.http";

/// How the step calls out.
#[derive(Clone, Debug)]
pub struct HttpStepConfig {
    /// Which non-public addresses it may reach.
    pub egress: EgressPolicy,
    /// The most response body bytes it reads; a larger body fails the step.
    pub max_response_bytes: usize,
    /// A call's timeout when its input sets none.
    pub default_timeout: Duration,
    /// The longest timeout a call's input may set.
    pub max_timeout: Duration,
    /// The most redirects followed, each checked as the first URL is.
    pub max_redirects: usize,
}

impl Default for HttpStepConfig {
    fn default() -> Self {
        HttpStepConfig {
            egress: EgressPolicy::public_only(),
            max_response_bytes: 1024 * 1024,
            default_timeout: Duration::from_secs(30),
            max_timeout: Duration::from_secs(300),
            max_redirects: 5,
        }
    }
}

/// Registers `durable.http` in `registry`, calling out under `config`.
pub fn register(registry: &mut Registry, config: HttpStepConfig) -> Result<(), reqwest::Error> {
    let caller = Arc::new(call::Caller::new(config)?);
    registry.step(HTTP_STEP, move |ctx: StepContext, input: HttpCall| {
        let caller = caller.clone();
        async move {
            let connection = ctx.connection(&input.connection).await?;
            caller
                .call(&connection, input)
                .await
                .map_err(StepError::from)
        }
    });
    Ok(())
}
