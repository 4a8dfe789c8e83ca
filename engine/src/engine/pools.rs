//! A tenant's routing definitions: its worker pools, created, changed and deleted by the tenant
//! (through its verified door) and listed with the partition each pool's workers serve, and its
//! routing rules; each edit bumps the tenant's definitions version.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::{Engine, EngineError};
use crate::model::{
    LabelError, Namespace, Pool, PoolName, PoolStatus, PoolWorkers, RoutePreview, RouteTarget,
    RoutingRules, Scope, StepRoute, WorkerGroup, check_labels,
};
use crate::store::PoolPut;
use crate::transport::{DefinitionsNotice, naming};

impl Engine {
    /// Creates pool `name` of `tenant` with `labels`, or replaces the labels of the one it has.
    /// Refused past the tenant's plan (`max_pools`), or with labels that break the rules.
    pub async fn put_pool(
        &self,
        tenant: &Namespace,
        name: PoolName,
        labels: BTreeMap<String, String>,
    ) -> Result<PoolPut, EngineError> {
        check_labels(&labels).map_err(|e: LabelError| EngineError::BadInput(e.to_string()))?;
        let state = &self.state;
        let now = state.clock.now();
        let pool = Pool {
            tenant: tenant.clone(),
            name,
            labels,
            created_at: now,
            updated_at: now,
            shared: false,
        };
        let allowed = self.effective_plan(tenant).await.pools_allowed();
        let put = state.store.put_pool(&pool, allowed).await?;
        self.announce_definitions(tenant, put.version).await;
        Ok(put)
    }

    /// The pools of `tenant`, by name: its own, and the shared pools granted to it (marked
    /// `shared`).
    pub async fn pools(&self, tenant: &Namespace) -> Result<Vec<Pool>, EngineError> {
        let store = &self.state.store;
        let mut pools = store.pools(tenant).await?;
        pools.extend(
            store
                .granted_pools(tenant)
                .await?
                .iter()
                .map(|p| p.as_granted(tenant)),
        );
        pools.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(pools)
    }

    /// The pools of `tenant` as its doors list them: each with its partition, the live workers
    /// there with the capabilities and SDKs they announced, and its steps out. Workers and
    /// steps out that cannot be read are left out: a pool is listed either way.
    pub async fn pool_statuses(&self, tenant: &Namespace) -> Result<Vec<PoolStatus>, EngineError> {
        let pools = self.pools(tenant).await?;
        Ok(self.statuses(tenant, pools).await)
    }

    /// `pool` of `tenant` (one its door just read or saved) as [`Engine::pool_statuses`] lists
    /// it, reading the live workers of that pool only.
    pub async fn pool_status(&self, tenant: &Namespace, pool: Pool) -> PoolStatus {
        let (groups, out) = self.live_state(tenant).await;
        self.status_of(pool, &groups, &out).await
    }

    /// `pools` with their live workers (and what those announced) and steps out.
    async fn statuses(&self, tenant: &Namespace, pools: Vec<Pool>) -> Vec<PoolStatus> {
        let (groups, out) = self.live_state(tenant).await;
        let mut statuses = Vec::with_capacity(pools.len());
        for pool in pools {
            statuses.push(self.status_of(pool, &groups, &out).await);
        }
        statuses
    }

    /// The live worker groups on `tenant`'s partitions and its steps out by token, or none of
    /// what cannot be read.
    async fn live_state(&self, tenant: &Namespace) -> (Vec<WorkerGroup>, Vec<(String, u64)>) {
        let scope = Scope::Only(tenant.clone());
        let groups = self
            .state
            .transport
            .worker_groups(&scope)
            .await
            .unwrap_or_default();
        (groups, self.steps_out(tenant).await.unwrap_or_default())
    }

    /// `pool` with those of `groups` on its partition (and what they announced) and its share
    /// of `out`.
    async fn status_of(
        &self,
        pool: Pool,
        groups: &[WorkerGroup],
        out: &[(String, u64)],
    ) -> PoolStatus {
        let partition = pool.partition();
        let waiting = out
            .iter()
            .filter(|(token, _)| naming::split_token(token).1 == partition)
            .map(|(_, n)| n)
            .sum();
        let mut workers = Vec::new();
        for group in groups
            .iter()
            .filter(|g| g.partition.as_ref() == Some(&partition))
        {
            let descriptors = self
                .state
                .transport
                .worker_descriptors(&group.token())
                .await
                .unwrap_or_default();
            let capabilities: BTreeSet<&str> = descriptors
                .iter()
                .flat_map(|d| d.capabilities.iter().map(String::as_str))
                .collect();
            let sdks: BTreeSet<String> = descriptors
                .iter()
                .map(|d| format!("{} {}", d.sdk.name, d.sdk.version))
                .collect();
            workers.push(PoolWorkers {
                name: group.name.clone(),
                workers: group.workers,
                last_seen: group.last_seen,
                capabilities: capabilities.into_iter().map(str::to_owned).collect(),
                sdks: sdks.into_iter().collect(),
            });
        }
        PoolStatus {
            partition: partition.to_string(),
            pool,
            workers,
            waiting,
        }
    }

    /// Deletes pool `name` of `tenant`; whether there was one. Refused while a routing rule
    /// names it. Steps already sent to it stay in its queue for its workers.
    pub async fn delete_pool(
        &self,
        tenant: &Namespace,
        name: &PoolName,
    ) -> Result<bool, EngineError> {
        if let Some(rules) = self.state.store.routing_rules(tenant).await?
            && let Some(at) = rules
                .rules
                .iter()
                .position(|r| r.pool == name.as_str() || r.fallback.iter().any(|f| f == name))
        {
            return Err(EngineError::BadInput(format!(
                "pool `{name}` is named by routing rule {}: change the rules (PUT /api/v1/routing) before deleting it",
                at + 1
            )));
        }
        let deleted = self.state.store.delete_pool(tenant, name).await?;
        if let Some(version) = deleted {
            self.announce_definitions(tenant, version).await;
        }
        Ok(deleted.is_some())
    }

    /// Replaces `tenant`'s routing rules; the tenant's definitions version after it. Refused,
    /// saving nothing, unless the list ends with a catch-all, names only the tenant's pools
    /// (or `default`) and fits the plan (`max_rules`).
    pub async fn put_routing_rules(
        &self,
        tenant: &Namespace,
        rules: RoutingRules,
    ) -> Result<u64, EngineError> {
        let state = &self.state;
        let pools = self
            .pools(tenant)
            .await?
            .into_iter()
            .map(|p| p.name)
            .collect();
        let allowed = self.effective_plan(tenant).await.rules_allowed();
        rules
            .check(&pools, allowed)
            .map_err(|e| EngineError::BadInput(e.to_string()))?;
        let version = state
            .store
            .put_routing_rules(tenant, &rules, state.clock.now())
            .await?;
        self.announce_definitions(tenant, version).await;
        Ok(version)
    }

    /// `tenant`'s routing rules and the definitions version they are at; no rules (every step
    /// goes where its code says, else to the tenant's own partition) until it sets some.
    pub async fn routing_rules(
        &self,
        tenant: &Namespace,
    ) -> Result<(Option<RoutingRules>, u64), EngineError> {
        let store = &self.state.store;
        let version = store.definitions_version(tenant).await?;
        Ok((store.routing_rules(tenant).await?, version))
    }

    /// How many of `tenant`'s steps were sent to each of its partitions' tokens and have no
    /// result yet (waiting or running): its pools' backlog.
    pub async fn steps_out(&self, tenant: &Namespace) -> Result<Vec<(String, u64)>, EngineError> {
        Ok(self.state.store.steps_out(tenant).await?)
    }

    /// Where a send of `target` in `tenant` would go under its rules as stored now (no pool
    /// named by code): the rules page's tester. Sends nothing; the tenant's plan clamps the
    /// priority as it would a real send.
    pub async fn preview_route(
        &self,
        tenant: &Namespace,
        target: &RouteTarget<'_>,
    ) -> Result<RoutePreview, EngineError> {
        let (rules, version) = self.routing_rules(tenant).await?;
        let routed = crate::driver::routing::route(
            tenant,
            None,
            rules.as_ref().map(|r| (r, version)),
            target,
        );
        let plan = self.effective_plan(tenant).await;
        Ok(RoutePreview {
            partition: routed.partition.to_string(),
            route: routed.route.unwrap_or_else(StepRoute::by_default),
            fallback: routed.fallbacks,
            priority: plan.clamp_priority(routed.priority),
        })
    }

    /// Makes an edit of `tenant`'s definitions (now at `version`) reach every control plane
    /// before this one answers: its own copy is dropped, the edit announced, and the live
    /// peers' acknowledgements waited for ([`ACKS_WITHIN`] at most; a peer that does not
    /// answer finds the edit by its periodic version check).
    pub(super) async fn announce_definitions(&self, tenant: &Namespace, version: u64) {
        let state = &self.state;
        state.definitions.forget(tenant);
        if !state.transport.reaches_peers() {
            return;
        }
        let peers = state.peers();
        state.definitions.expect_acks(tenant, version);
        let notice = DefinitionsNotice {
            tenant: tenant.clone(),
            version,
            seen_by: None,
        };
        if let Err(e) = state.transport.publish_definitions(notice).await {
            tracing::warn!(error = %e, %tenant, "could not announce an edit of the tenant's definitions; other control planes find it by their periodic check");
        }
        let acked = state
            .definitions
            .wait_for_acks(tenant, version, &state.config.owner, peers, ACKS_WITHIN)
            .await;
        if acked < peers {
            tracing::info!(%tenant, version, acked, peers, "not every control plane acknowledged the edit in time; the others find it by their periodic check");
        }
    }
}

/// How long an edit waits for the other control planes to acknowledge it.
const ACKS_WITHIN: Duration = Duration::from_secs(2);
