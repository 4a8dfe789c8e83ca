//! [`crate::store::Leases`]: claims, leases and the drivers' heartbeats, on the statements of
//! `lifecycle.rs`.

use async_trait::async_trait;

use super::SqliteStore;
use crate::model::{Millis, Run, RunId, Scope};
use crate::store::rules::lifecycle::ClaimRequest;
use crate::store::{Leases, Runnable, StoreResult};

#[async_trait]
impl Leases for SqliteStore {
    async fn claim_runs(
        &self,
        scope: &Scope,
        owner: &str,
        now: Millis,
        lease_ms: i64,
        limit: u32,
        max_recoveries: u32,
    ) -> StoreResult<Vec<Run>> {
        let req = ClaimRequest::new(scope, owner, now, lease_ms, limit, max_recoveries);
        self.writer
            .write(move |conn| super::lifecycle::claim_runs(conn, &req))
            .await
    }

    async fn runnable_runs(
        &self,
        scope: &Scope,
        now: Millis,
        per_tenant: u32,
        limit: u32,
        max_recoveries: u32,
    ) -> StoreResult<Vec<Runnable>> {
        let scope = scope.clone();
        self.readers
            .read(move |conn| {
                super::lifecycle::runnable_runs(
                    conn,
                    &scope,
                    now,
                    per_tenant,
                    limit,
                    max_recoveries,
                )
            })
            .await
    }

    async fn claim_these(
        &self,
        scope: &Scope,
        ids: &[RunId],
        owner: &str,
        now: Millis,
        lease_ms: i64,
        max_recoveries: u32,
    ) -> StoreResult<Vec<Run>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let req = ClaimRequest::these(scope, ids, owner, now, lease_ms, max_recoveries);
        self.writer
            .write(move |conn| super::lifecycle::claim_runs(conn, &req))
            .await
    }

    async fn renew_leases(&self, owner: &str, ids: &[RunId], until: Millis) -> StoreResult<u64> {
        if ids.is_empty() {
            return Ok(0);
        }
        let (owner, ids) = (owner.to_owned(), ids.to_vec());
        self.writer
            .write(move |conn| super::lifecycle::renew_leases(conn, &owner, &ids, until))
            .await
    }

    async fn beat_driver(&self, owner: &str, alive_until: Millis, now: Millis) -> StoreResult<u32> {
        let owner = owner.to_owned();
        self.writer
            .write(move |conn| super::lifecycle::beat_driver(conn, &owner, alive_until, now))
            .await
    }

    async fn next_wake_at(&self, scope: &Scope) -> StoreResult<Option<Millis>> {
        let scope = scope.clone();
        self.readers
            .read(move |conn| super::reads::next_wake_at(conn, &scope))
            .await
    }

    async fn release_leases(&self, owner: &str, now: Millis) -> StoreResult<u64> {
        let owner = owner.to_owned();
        self.writer
            .write(move |conn| super::lifecycle::release_leases(conn, &owner, now))
            .await
    }
}
