//! The engine end to end, one module per behaviour. Every case runs on both deployments: the
//! embedded pair (a SQLite file, the in-process transport and an embedded step worker) and the
//! cluster pair (a fresh PostgreSQL database and a fresh Redis key prefix). One test crate, so
//! cargo builds and links it once.
//!
//! To add a case: write `async fn case(backend: Backend)` in the module of its behaviour, build
//! its processes with [`backend::Backend`], and list it in that module's `engine_cases!`. A case
//! that holds on the embedded pair only is listed after `embedded_only:`, with why.
//!
//! The PostgreSQL + Redis cases skip with a loud line when `DURABLE_SKIP_POSTGRES` or
//! `DURABLE_SKIP_REDIS` is set (`make test` sets them when a server is absent outside CI), and
//! fail when a server is unreachable.

// The cases are tests, but each is an `async fn(Backend)` that `engine_cases!` calls rather than
// a `#[test]` itself, which clippy's `allow-unwrap-in-tests` does not see.
#![allow(clippy::unwrap_used)]

#[path = "../common/mod.rs"]
mod common;
#[macro_use]
mod macros;

mod backend;
mod backlog;
mod events;
mod harness;
mod registries;

mod blocked;
mod children;
mod connections;
mod control;
mod early_dispatch;
mod engine_time;
mod fairness;
mod flow;
mod handlers;
mod one_sqlite_file;
mod patches;
mod peers;
mod plans;
mod published_events;
mod restarts;
mod routing;
mod run_limits;
mod sagas;
mod schedules;
mod signals;
mod starts;
mod steps;
