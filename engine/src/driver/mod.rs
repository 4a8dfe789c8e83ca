//! The control loops that move runs forward: drive (claim runnable runs and execute a turn),
//! results (apply step results), redispatch (re-send steps whose dispatch was lost) and lease
//! renewal, and the sweep that ends runs their drivers abandoned. Each loop is filtered on the engine's namespace; an operator engine filters nothing.

mod ahead;
mod drive;
mod engine;
mod guard;
mod inbox;
mod input;
mod lease;
mod publisher;
mod redispatch;
mod remote;
mod results;
mod shared;
mod start;
mod sticky;
mod sweep;
mod turning;

pub use engine::{Control, Engine, EngineConfig, EngineError, StartRun};
