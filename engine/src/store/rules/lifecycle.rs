//! The rules of the writes outside turns: the control verbs and the sweep.
//!
//! One rule, two dialects: a run a verb or the sweep ends settles its parent's wait in the same
//! transaction; a compare-and-set that expects no status moves nothing; a signal reaches only a
//! run that has not ended, and wakes it; an update is a signal kept with its reply, once per id.
//! Each store supplies the statements
//! ([`LifecycleStatements`]) in its SQL.

use std::collections::HashMap;

use serde_json::Value;

use super::plans::{fresh_run, live_statuses};
use super::settle::settle_ended;
use super::statement::Statement;
use super::turn::TurnStatements;
use crate::model::{
    AcceptedUpdate, Millis, Run, RunId, RunStatus, Scope, StepFailure, StoredUpdate, UpdateId,
};
use crate::store::columns::RUN_COLS;
use crate::store::{RunPatch, SignalSent, StoreResult, UpdateSent};

/// What [`crate::store::Store::claim_runs`] asks for: up to `limit` runnable runs in `scope`,
/// leased to `owner` until `now + lease_ms`, leaving runs recovered `max_recoveries` times to
/// the sweep.
pub(crate) struct ClaimRequest {
    pub scope: Scope,
    pub owner: String,
    pub now: Millis,
    pub lease_ms: i64,
    pub limit: u32,
    pub max_recoveries: u32,
    /// Only these runs, when set (a fair pick's): their fresh runs start only under their
    /// tenants' ceilings and their keys' limits, as stored.
    pub only: Option<Vec<RunId>>,
}

impl ClaimRequest {
    /// The request [`crate::store::Store::claim_runs`]'s arguments make.
    pub(crate) fn new(
        scope: &Scope,
        owner: &str,
        now: Millis,
        lease_ms: i64,
        limit: u32,
        max_recoveries: u32,
    ) -> Self {
        ClaimRequest {
            scope: scope.clone(),
            owner: owner.to_owned(),
            now,
            lease_ms,
            limit,
            max_recoveries,
            only: None,
        }
    }

    /// The request [`crate::store::Store::claim_these`]'s arguments make.
    pub(crate) fn these(
        scope: &Scope,
        ids: &[RunId],
        owner: &str,
        now: Millis,
        lease_ms: i64,
        max_recoveries: u32,
    ) -> Self {
        let limit = u32::try_from(ids.len()).unwrap_or(u32::MAX);
        ClaimRequest {
            only: Some(ids.to_vec()),
            ..Self::new(scope, owner, now, lease_ms, limit, max_recoveries)
        }
    }
}

/// Of `fresh` (a tenant's fresh runs among those a claim asks for, earliest first), the ones
/// to leave waiting when `started` of its top-level runs are running under `ceiling` (counted
/// by [`super::plans::STARTED_SQL`]).
pub(crate) fn over_ceiling(fresh: Vec<RunId>, started: u64, ceiling: u32) -> Vec<RunId> {
    let room = u64::from(ceiling).saturating_sub(started) as usize;
    fresh.into_iter().skip(room).collect()
}

/// [`crate::store::Store::runnable_runs`], up to its filter: each run's rank within its
/// workflow and concurrency key, then within its tenant by that rank, so a tenant's firsts are
/// one per workflow (and key) in turn. A fresh run whose workflow concurrency key is at its limit
/// is left out, and of a key's fresh runs only as many as its limit has room for are in: runs
/// that would only be refused must not take the places of the tenant's others. Each key's
/// started runs are counted once per read (a grouped join, served by the partial index on
/// started keyed runs), not once per queued run. [`runnable_ranked`] appends what needs a turn and
/// the scope (on unqualified columns, which name the runs: the join's are prefixed `k_`), then
/// [`RUNNABLE_RANKED_END`] with the per-tenant cap, then ` ORDER BY … LIMIT `.
const RUNNABLE_RANKED: &str = concat!(
    "SELECT id, namespace, workflow, concurrency_key, due, fresh FROM \
    (SELECT id, namespace, workflow, concurrency_key, due, fresh, \
    ROW_NUMBER() OVER (PARTITION BY namespace ORDER BY in_key, due, id) AS in_tenant \
    FROM (SELECT id, namespace, workflow, concurrency_key, due, fresh, \
    ROW_NUMBER() OVER (PARTITION BY namespace, workflow, concurrency_key ORDER BY due, id) AS in_key \
    FROM (SELECT id, namespace, workflow, concurrency_key, COALESCE(wake_at, created_at) AS due, (",
    fresh_run!(),
    ") AS fresh, CASE WHEN concurrency_key IS NOT NULL AND ",
    fresh_run!(),
    " THEN MAX(concurrency_limit) OVER (PARTITION BY namespace, workflow, concurrency_key) \
    - COALESCE(k_started, 0) END AS room, \
    ROW_NUMBER() OVER (PARTITION BY namespace, workflow, concurrency_key, (",
    fresh_run!(),
    ") ORDER BY COALESCE(wake_at, created_at), id) AS in_fresh \
    FROM runs LEFT JOIN (SELECT namespace AS k_namespace, workflow AS k_workflow, \
    concurrency_key AS k_key, count(*) AS k_started FROM runs \
    WHERE concurrency_key IS NOT NULL AND attempt > admitted_attempt AND status IN ",
    live_statuses!(),
    " GROUP BY namespace, workflow, concurrency_key) started_keys ON k_namespace = namespace \
    AND k_workflow = workflow AND k_key = concurrency_key WHERE "
);

/// What closes [`RUNNABLE_RANKED`]; the per-tenant cap follows it, then ` ORDER BY … LIMIT `.
const RUNNABLE_RANKED_END: &str =
    ") candidates WHERE room IS NULL OR in_fresh <= room) by_key) by_tenant WHERE in_tenant <= ";

/// `(status = 'pending' OR …)`: what needs a turn at `now`: pending runs, suspended ones whose
/// timer has passed, and running ones whose lease lapsed (fewer than `max_recoveries` times).
fn runnable(sql: &mut impl Statement, now: Millis, max_recoveries: u32) {
    sql.push("(status = 'pending' OR (status = 'suspended' AND wake_at <= ")
        .bind_int(now)
        .push(") OR (status = 'running' AND locked_until < ")
        .bind_int(now)
        .push(" AND recoveries < ")
        .bind_int(i64::from(max_recoveries))
        .push("))");
}

/// [`crate::store::Store::runnable_runs`]' statement: the columns `id, namespace, workflow,
/// concurrency_key, due, fresh` of at most `per_tenant` runs of each tenant in `scope` that
/// need a turn at `now`, at most `limit` in all, each tenant's firsts first.
pub(crate) fn runnable_ranked(
    sql: &mut impl Statement,
    scope: &Scope,
    now: Millis,
    per_tenant: u32,
    limit: u32,
    max_recoveries: u32,
) {
    sql.push(RUNNABLE_RANKED);
    runnable(sql, now, max_recoveries);
    sql.scope("namespace", scope)
        .push(RUNNABLE_RANKED_END)
        .bind_int(i64::from(per_tenant))
        .push(" ORDER BY in_tenant, due, id LIMIT ")
        .bind_int(i64::from(limit));
}

/// A claim's update, once the fresh runs a ceiling or key limit holds back are out of `only`:
/// the runs in `req`'s scope that need a turn (of `only`, when set), oldest due first, taken
/// for `req.owner` until the lease ends, returning their [`RUN_COLS`]. A run taken while
/// running counts one more recovery.
pub(crate) fn claim(sql: &mut impl Statement, req: &ClaimRequest, only: Option<&[RunId]>) {
    sql.push(
        "UPDATE runs SET recoveries = recoveries + (CASE WHEN status = 'running' THEN 1 ELSE 0 END), \
         status = 'running', needs_wake = FALSE, wake_at = NULL, attempt = attempt + 1, locked_by = ",
    )
    .bind_text(req.owner.clone())
    .push(", locked_until = ")
    .bind_int(req.now + req.lease_ms)
    .push(", updated_at = ")
    .bind_int(req.now)
    .push(" WHERE id IN (SELECT id FROM runs WHERE ");
    runnable(sql, req.now, req.max_recoveries);
    sql.scope("namespace", &req.scope);
    if let Some(ids) = only {
        sql.among("id", ids.iter().map(|id| id.as_str().to_owned()).collect());
    }
    sql.push(" ORDER BY COALESCE(wake_at, created_at) LIMIT ")
        .bind_int(i64::from(req.limit))
        .lock_rows()
        .push(&format!(") RETURNING {RUN_COLS}"));
}

/// How many runs of tenant `$1`'s workflow `$2` with concurrency key `$3` are started and not
/// ended: what a fresh run of that key is counted against when it is claimed.
pub(crate) const KEY_STARTED_SQL: &str = concat!(
    "SELECT count(*) FROM runs WHERE namespace = $1 AND workflow = $2 AND concurrency_key = $3 \
     AND attempt > admitted_attempt AND status IN ",
    live_statuses!()
);

/// The columns of a fresh keyed run a claim asks for, for [`over_key_limits`]; a store appends
/// its id list filter.
pub(crate) const KEYED_FRESH_SQL: &str = concat!(
    "SELECT id, namespace, workflow, concurrency_key, concurrency_limit FROM runs \
    WHERE concurrency_key IS NOT NULL AND ",
    fresh_run!(),
    " AND status = 'pending' AND id "
);

/// A fresh run a claim asks for whose workflow has a concurrency limit.
pub(crate) struct KeyedFresh {
    pub id: RunId,
    /// `(tenant, workflow, key)`: what its limit counts.
    pub counter: (String, String, String),
    pub limit: u32,
}

/// Of `fresh` (earliest first), the runs to leave waiting when `started(counter)` of their key's
/// runs are running: they start while their key has fewer running than its limit, counting
/// those this claim starts before them. A key's limit is the largest its queued runs were
/// started under, so raising a limit lets the runs queued before the change start too, rather
/// than leaving them behind the newer runs for as long as the key stays busy.
pub(crate) fn over_key_limits(
    fresh: Vec<KeyedFresh>,
    started: &HashMap<(String, String, String), u64>,
) -> Vec<RunId> {
    let mut limits = HashMap::<&(String, String, String), u32>::new();
    for run in &fresh {
        let limit = limits.entry(&run.counter).or_default();
        *limit = (*limit).max(run.limit);
    }
    let limits: HashMap<(String, String, String), u32> =
        limits.into_iter().map(|(k, v)| (k.clone(), v)).collect();
    let mut running = started.clone();
    let mut held = Vec::new();
    for run in fresh {
        let limit = limits.get(&run.counter).copied().unwrap_or(run.limit);
        let count = running.entry(run.counter).or_default();
        if *count < u64::from(limit) {
            *count += 1;
        } else {
            held.push(run.id);
        }
    }
    held
}

/// The statements of the control verbs and the sweep, in a store's dialect, inside its write
/// transaction.
pub(crate) trait LifecycleStatements: TurnStatements {
    /// Moves run `id` (if `scope` sees it and its status is one of `expected`, never empty) to
    /// `patch`; the run after it. A terminal status also ends its lease and timer.
    async fn update_status_if(
        &mut self,
        scope: &Scope,
        id: &RunId,
        expected: &[RunStatus],
        patch: &RunPatch,
        now: Millis,
    ) -> StoreResult<Option<Run>>;

    /// Run `id`, if `scope` sees it, held until the transaction ends (a signal is buffered only
    /// for a run that has not ended).
    async fn run_to_signal(&mut self, scope: &Scope, id: &RunId) -> StoreResult<Option<Run>>;

    /// Buffers signal `name` with `payload` for run `id`; an update's signal also keeps its id
    /// and reply.
    async fn buffer_signal(
        &mut self,
        id: &RunId,
        name: &str,
        payload: &Value,
        update: Option<(&UpdateId, &Value)>,
        now: Millis,
    ) -> StoreResult<()>;

    /// The update kept with run `id` under `update_id`.
    async fn update_of(
        &mut self,
        id: &RunId,
        update_id: &UpdateId,
    ) -> StoreResult<Option<StoredUpdate>>;

    /// Ends as `dead`, recording `error`, the `running` runs in `scope` whose lease expired
    /// after `max_recoveries` recoveries; the runs it ended.
    async fn bury_dead(
        &mut self,
        scope: &Scope,
        max_recoveries: u32,
        error: Self::Json,
        now: Millis,
    ) -> StoreResult<Vec<Run>>;

    /// Ends as `cancelled` the `cancelling` runs in `scope` whose driver is gone (no lease, or
    /// an expired one); the runs it ended.
    async fn end_cancelling(&mut self, scope: &Scope, now: Millis) -> StoreResult<Vec<Run>>;
}

/// [`crate::store::Store::update_run_if`] inside a write transaction; `None` means nothing moved.
pub(crate) async fn update_run_if<S: LifecycleStatements>(
    s: &mut S,
    scope: &Scope,
    id: &RunId,
    expected: &[RunStatus],
    patch: &RunPatch,
    now: Millis,
) -> StoreResult<Option<Run>> {
    if expected.is_empty() {
        return Ok(None);
    }
    let Some(run) = s.update_status_if(scope, id, expected, patch, now).await? else {
        return Ok(None);
    };
    settle_ended(s, &run, now).await?;
    Ok(Some(run))
}

/// [`crate::store::Store::send_signal`] inside a write transaction; only
/// [`SignalSent::Delivered`] wrote anything.
pub(crate) async fn send_signal<S: LifecycleStatements>(
    s: &mut S,
    scope: &Scope,
    id: &RunId,
    name: &str,
    payload: &Value,
    now: Millis,
) -> StoreResult<SignalSent> {
    let Some(run) = s.run_to_signal(scope, id).await? else {
        return Ok(SignalSent::NotFound);
    };
    if run.status.is_terminal() {
        return Ok(SignalSent::RunFinished(run));
    }
    s.buffer_signal(id, name, payload, None, now).await?;
    s.wake(id, now).await?;
    let run = s.run_by_id(id).await?.unwrap_or(run);
    Ok(SignalSent::Delivered(run))
}

/// [`crate::store::RunControl::send_update`] inside a write transaction.
pub(crate) async fn send_update<S: LifecycleStatements>(
    s: &mut S,
    scope: &Scope,
    id: &RunId,
    update: &AcceptedUpdate,
    now: Millis,
) -> StoreResult<UpdateSent> {
    let Some(run) = s.run_to_signal(scope, id).await? else {
        return Ok(UpdateSent::NotFound);
    };
    // The run is held: a repeat under the same id waits for this one, then finds it.
    if let Some(kept) = s.update_of(id, &update.id).await? {
        return Ok(UpdateSent::Repeated(kept));
    }
    if run.status.is_terminal() {
        return Ok(UpdateSent::RunFinished(run));
    }
    let kept = Some((&update.id, &update.reply));
    s.buffer_signal(id, &update.name, &update.argument, kept, now)
        .await?;
    s.wake(id, now).await?;
    let run = s.run_by_id(id).await?.unwrap_or(run);
    Ok(UpdateSent::Delivered(run))
}

/// [`crate::store::Store::sweep_abandoned`] inside a write transaction: buries the runs whose
/// drivers kept dying, ends the orphaned `cancelling` ones, and settles their parents' waits.
pub(crate) async fn sweep_abandoned<S: LifecycleStatements>(
    s: &mut S,
    scope: &Scope,
    max_recoveries: u32,
    now: Millis,
) -> StoreResult<Vec<Run>> {
    let dead = S::json(&dead(max_recoveries));
    let mut ended = s.bury_dead(scope, max_recoveries, dead, now).await?;
    ended.extend(s.end_cancelling(scope, now).await?);
    for run in &ended {
        settle_ended(s, run, now).await?;
    }
    Ok(ended)
}

/// The error of a run given up after `max_recoveries` driver deaths.
fn dead(max_recoveries: u32) -> StepFailure {
    StepFailure::new(format!(
        "the run's driver stopped {max_recoveries} times while running it; it was given up as dead \
         (retry it once the cause is fixed)"
    ))
    .with_code("dead")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fresh(id: &str, key: &str, limit: u32) -> KeyedFresh {
        KeyedFresh {
            id: RunId::parse(id).unwrap(),
            counter: ("acme".into(), "charge".into(), key.into()),
            limit,
        }
    }

    #[test]
    fn a_key_starts_runs_up_to_its_largest_queued_limit_counting_those_running() {
        let counter = |key: &str| ("acme".to_owned(), "charge".to_owned(), key.to_owned());
        let started = HashMap::from([(counter("alice"), 1)]);
        // Alice has one running; her oldest queued run was started under a limit of 1, the
        // newer ones under 3 (the limit was raised): two more start, the oldest first.
        let held = over_key_limits(
            vec![
                fresh("a1", "alice", 1),
                fresh("a2", "alice", 3),
                fresh("a3", "alice", 3),
                fresh("b1", "bob", 1),
                fresh("b2", "bob", 1),
            ],
            &started,
        );
        let held: Vec<&str> = held.iter().map(RunId::as_str).collect();
        assert_eq!(held, ["a3", "b2"]);
    }
}
