//! The engine over a real Redis: Rust step workers on their tenant's partition, and the
//! unmodified Python `durable-worker` from PyPI serving a step of a Rust workflow.
//!
//! The Python case needs `DURABLE_PYTHON`: a Python with `durable-worker[redis]==0.26.1`
//! (`make test` creates that virtualenv). Without it the case is skipped with a loud line,
//! except in CI, where it fails.

#[path = "../common/mod.rs"]
mod common;

mod beats;
mod connections;
mod harness;
mod malformed;
mod pools;
mod python;
mod routing;
mod shared_pools;
mod turns;
