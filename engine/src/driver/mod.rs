//! The control loops that move runs forward: drive (claim runnable runs and execute a turn),
//! results (apply step results), redispatch (re-send steps whose dispatch was lost) and lease
//! renewal. Each loop is filtered on the engine's namespace; an operator engine filters nothing.

mod drive;
mod engine;
mod lease;
mod redispatch;
mod results;
mod shared;

pub use engine::{Control, Engine, EngineConfig, EngineError, StartRun};
