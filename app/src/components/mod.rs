//! Reusable pieces of the dashboard.

pub mod answer;
pub mod diff;
pub mod error_box;
pub mod json;
pub mod layout;
pub mod live;
pub mod status;
pub mod time;
pub mod timeline;
pub mod tree;
