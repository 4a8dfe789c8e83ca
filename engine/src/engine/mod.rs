//! The public face of the engine: [`Engine`] starts and stops the driver's loops
//! ([`crate::driver`]) and carries out what callers ask (start a run, signal, cancel, retry,
//! continue, redispatch), refusing bad input before anything is written ([`StartRun`] and the
//! checks beside it). Every door (HTTP, dashboard, wire, CLI) goes through it.

mod connections;
mod error;
mod handle;
mod handlers;
mod input;
mod lifecycle;
mod master_keys;
mod plans;
mod pools;
mod publish;
mod quota;
mod shared_pools;
mod start;
mod verbs;

pub use crate::driver::EngineConfig;
pub use connections::ConnectionSaved;
pub use error::{EngineError, QuotaExceeded};
pub use handle::Engine;
pub use handlers::UpdateOutcome;
pub use input::StartRun;
pub(crate) use input::check_payload;
pub use master_keys::Rotation;
pub use verbs::Control;
