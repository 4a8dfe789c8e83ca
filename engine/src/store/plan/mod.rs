//! What both stores compute the same way, written once: one rule, two dialects.
//!
//! Which filters a list applies and how its page is cut, how counts aggregate: those rules live
//! here, so the SQLite and PostgreSQL stores cannot drift apart; each store keeps only its SQL
//! and its I/O.
//!
//! - `filters.rs`: a list query's filters and its page;
//! - `reads.rs`: counts both stores aggregate alike.

pub(crate) mod filters;
pub(crate) mod reads;
