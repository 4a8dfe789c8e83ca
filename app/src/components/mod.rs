//! Reusable pieces of the dashboard.

pub mod json;
pub mod layout;
pub mod live;
pub mod status;
pub mod time;
