//! One file per screen, each with the server functions it calls.

pub mod actions;
pub mod activity;
pub mod bulk;
pub mod connections;
pub mod filters;
pub mod login;
pub mod operator;
pub mod plans;
pub mod pools;
pub mod publish;
pub mod queries;
pub mod routing;
pub mod run_detail;
pub mod runs;
pub mod schedules;
pub mod tokens;
