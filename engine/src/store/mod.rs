//! Durable state: runs, checkpoints, and the dashboard's accounts.
//!
//! [`Store`] is the seam every backend implements, split into capability traits by concern
//! ([`api`]); every read path takes a [`crate::model::Scope`] so a tenant filter cannot be
//! forgotten, and [`ScopedStore`] fixes that scope for a whole request. Backends normalise their
//! failures onto [`StoreError`].

mod accounts;
pub mod api;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod columns;
mod connections;
mod error;
mod pools;
#[cfg(feature = "postgres")]
mod postgres;
mod records;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod rules;
mod schedules;
mod scoped;
mod shared_pools;
#[cfg(feature = "sqlite")]
mod sqlite;
mod tokens;

#[cfg(any(test, feature = "test-util"))]
pub mod conformance;

pub use accounts::{AccountChange, Accounts, LoginLimit, NewUser, Reservation, User};
pub use api::{
    Dispatches, Events, Leases, Plans, Retention, RunControl, RunReads, Store, Turns, Upkeep,
};
pub use connections::{ConnectionPut, Connections, StoredConnection, TenantKey};
pub use error::{StoreError, StoreResult};
pub use pools::{PoolPut, Pools};
#[cfg(feature = "postgres")]
pub use postgres::PgStore;
#[cfg(all(feature = "postgres", any(test, feature = "test-util")))]
pub use postgres::testing as postgres_testing;
pub use records::{
    Claim, Committed, EventDelivered, History, LostDispatch, NewCheckpoint, NewRun, PendingStep,
    Redispatch, RunPatch, Runnable, SignalSent, SlotOut, StepApplied, TurnCommit, TurnOutcome,
    UpdateSent,
};
pub use schedules::{ScheduleRow, Schedules};
pub use scoped::ScopedStore;
pub use shared_pools::{Grant, SharedPoolDeleted, SharedPools};
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteStore;
pub use tokens::{ApiTokens, NewToken};
