//! Support for the tests of this crate and of the crates above it.

mod hostile;
mod two_tenants;

pub use hostile::{hostile_json, hostile_string, wire_object};
pub use two_tenants::TwoTenants;
