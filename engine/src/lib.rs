//! `durable`: a multi-tenant durable workflow engine.
//!
//! Workflows are deterministic async Rust functions. Every side effect they perform (a step, a
//! timer, a signal, a child run) is recorded as a [`model::Checkpoint`]; when a run resumes, its
//! body is replayed from the top and completed checkpoints hand back their recorded values, so a
//! crash never repeats a completed step.
//!
//! With `default-features = false` this crate is only the serde [`model`] types, which the
//! dashboard also compiles to wasm.
//!
//! ```no_run
//! # #[cfg(feature = "sqlite")]
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use durable::prelude::*;
//!
//! let mut registry = Registry::new();
//! registry.step("greet", |_ctx: StepContext, name: String| async move {
//!     Ok::<_, StepError>(format!("hello, {name}"))
//! });
//! registry.workflow("hello", 1, |ctx: WorkflowContext, name: String| async move {
//!     let greeting: String = ctx.step("greet", &name).await?;
//!     Ok::<_, WorkflowError>(greeting)
//! });
//! # Ok(()) }
//! ```

pub mod model;

#[cfg(feature = "engine")]
pub mod builtin;
#[cfg(feature = "engine")]
mod driver;
#[cfg(feature = "engine")]
mod engine;
#[cfg(feature = "engine")]
pub mod fair;
#[cfg(feature = "engine")]
pub mod gateway;
#[cfg(feature = "engine")]
pub mod metrics;
#[cfg(feature = "engine")]
pub mod retention;
#[cfg(feature = "engine")]
pub mod runtime;
#[cfg(feature = "engine")]
pub mod schedules;
#[cfg(feature = "engine")]
pub mod secrets;
#[cfg(feature = "engine")]
pub mod store;
#[cfg(all(feature = "sqlite", feature = "test-util"))]
pub mod testing;
#[cfg(feature = "engine")]
pub mod trace_context;
#[cfg(feature = "engine")]
pub mod transport;
pub mod url;

#[cfg(feature = "engine")]
pub use engine::{
    ConnectionSaved, Control, Engine, EngineConfig, EngineError, QuotaExceeded, Rotation, StartRun,
    UpdateOutcome,
};
#[cfg(feature = "engine")]
pub use runtime::Registry;

/// The names most programs need, in one import.
#[cfg(feature = "engine")]
pub mod prelude {
    pub use crate::engine::{Engine, EngineConfig};
    pub use crate::model::{Concurrency, Namespace, RateLimit, RetryPolicy, Run, RunId, RunStatus};
    pub use crate::runtime::{
        Gather, Registry, StepContext, StepError, StepOptions, WorkflowContext, WorkflowError,
    };
}
