//! How plans are keyed and stored, and how a tenant's usage is counted, alike in both stores.
//!
//! Usage is counted from the runs themselves, in the store that holds them, rather than kept in
//! a counter beside them: a run that ends, is cancelled, dies or whose control plane is killed
//! leaves the count in the same write that moves it, so no counter can drift or leak a slot.

use crate::model::{Millis, Namespace, Plan};
use crate::store::{StoreError, StoreResult};

/// The `plans.tenant` of the default plan: not a tenant name any tenant can have.
pub(crate) const DEFAULT_KEY: &str = "*";

/// The window `starts_per_minute` and `Usage::started_last_minute` look at.
pub(crate) const MINUTE_MS: Millis = 60_000;

/// The statuses of a run that has not ended, as an SQL list.
macro_rules! live_statuses {
    () => {
        "('pending', 'running', 'suspended', 'blocked', 'cancelling')"
    };
}
pub(crate) use live_statuses;

/// A top-level run admitted (created or retried) and not claimed since: the runs a concurrency
/// ceiling or a workflow's limit holds queued. [`crate::model::Run::is_fresh`] in SQL.
macro_rules! fresh_run {
    () => {
        "parent_run_id IS NULL AND attempt = admitted_attempt"
    };
}
pub(crate) use fresh_run;

/// `FROM … WHERE …` of tenant `$1`'s top-level runs started (claimed at least once) and not
/// ended: what `max_concurrent_runs` counts, in usage and in a claim alike.
macro_rules! started_runs {
    () => {
        concat!(
            "FROM runs WHERE namespace = $1 AND parent_run_id IS NULL AND attempt > admitted_attempt \
             AND status IN ",
            live_statuses!()
        )
    };
}

/// How many of tenant `$1`'s top-level runs are started and not ended (see [`USAGE_SQL`]), as a
/// claim under a concurrency ceiling counts them.
pub(crate) const STARTED_SQL: &str = concat!("SELECT count(*) ", started_runs!());

/// `(running, queued, started_last_minute)` of tenant `$1`, counting starts since `$2`. A run
/// is started once a driver claimed it since it was admitted (`attempt > admitted_attempt`)
/// and running until it ends. Only top-level runs count against the concurrency and queue
/// ceilings: a child is part of the run that started it (holding it back could leave every
/// slot to parents waiting on children).
pub(crate) const USAGE_SQL: &str = concat!(
    "SELECT (SELECT count(*) ",
    started_runs!(),
    "), (SELECT count(*) FROM runs WHERE namespace = $1 AND ",
    fresh_run!(),
    " AND status IN ('pending', 'blocked')), \
     (SELECT count(*) FROM runs WHERE namespace = $1 AND created_at >= $2)"
);

/// The tenants with fresh runs (see [`fresh_run`]) pending among those a claim asks for; a
/// store appends its id list filter (` IN (…)` or `= ANY($1)`).
pub(crate) const FRESH_TENANTS_SQL: &str = concat!(
    "SELECT DISTINCT COALESCE(namespace, 'default') FROM runs WHERE ",
    fresh_run!(),
    " AND status = 'pending' AND id "
);

/// Of `tenants`, those with a concurrency ceiling in force and its value, from the stored
/// plans (the default's, `None`, among them; read in the claim's own transaction, so the
/// ceiling counted against is the one on record, never a cached one), sorted by tenant.
pub(crate) fn ceilings_of(
    tenants: Vec<String>,
    plans: Vec<(Option<Namespace>, Plan)>,
) -> Vec<(Namespace, u32)> {
    let mut default = Plan::default();
    let mut own = std::collections::HashMap::new();
    for (tenant, plan) in plans {
        match tenant {
            Some(tenant) => {
                own.insert(tenant, plan);
            }
            None => default = plan,
        }
    }
    let mut ceilings: Vec<(Namespace, u32)> = tenants
        .into_iter()
        .filter_map(|tenant| {
            let tenant = Namespace::from_stored(Some(&tenant));
            let plan = own
                .get(&tenant)
                .map_or_else(|| default.clone(), |p| p.over(&default));
            Some((tenant, plan.max_concurrent_runs?))
        })
        .collect();
    ceilings.sort_by(|a, b| a.0.as_str().cmp(b.0.as_str()));
    ceilings
}

/// The `plans.tenant` of `tenant`'s plan (`None`: the default).
pub(crate) fn key_of(tenant: Option<&Namespace>) -> String {
    tenant.map_or_else(|| DEFAULT_KEY.to_owned(), |t| t.as_str().to_owned())
}

/// The tenant a `plans.tenant` names (`None`: the default plan).
pub(crate) fn tenant_of(key: &str) -> Option<Namespace> {
    (key != DEFAULT_KEY).then(|| Namespace::from_stored(Some(key)))
}

/// A stored plan.
pub(crate) fn decode(key: &str, json: &str) -> StoreResult<Plan> {
    serde_json::from_str(json)
        .map_err(|e| StoreError::Corrupt(format!("the plan of `{key}` does not parse: {e}")))
}
