//! One file per screen, each with the server functions it calls.

pub mod actions;
pub mod login;
pub mod run_detail;
pub mod runs;
