//! Many runs' step results, each with the turn it wakes, in one statement.
//!
//! In a burst most writes are a step's result and the sticky turn it woke (see
//! [`crate::store::postgres::result::apply_result_and_commit`]). One statement for each costs PostgreSQL far more
//! CPU around the statement (planning, executor start-up, locks) than inside it, so the group
//! commit hands the ones queued together to [`apply_results_and_commit`], which writes them all
//! with one `UPDATE … FROM unnest(…)`: every parameter of the one-run statement becomes an array
//! with an element per run. Each run is moved exactly as the one-run statement moves it: only if
//! it is untouched since its cache was taken and its result's step still waits (whose row is
//! locked first), and nothing is written for a run that is not.

use futures::future::BoxFuture;
use serde_json::Value;
use sqlx::PgConnection;
use sqlx::postgres::PgRow;

use super::{Outcomes, each_failed, insert_checkpoints};
use crate::model::{Millis, Run, StepResult};
use crate::store::columns::RUN_COL_COUNT;
use crate::store::postgres::fused::waiting_step_sql;
use crate::store::postgres::rows::{RUN_COLS, db, run_from_row};
use crate::store::postgres::sql::PgQuery;
use crate::store::postgres::values::to_value;
use crate::store::postgres::values::{CheckpointArrays, CheckpointValues, row_values, unnest};
use crate::store::rules::result::columns;
use crate::store::rules::turn::{finish, run_update};
use crate::store::{Claim, Committed, StoreError, StoreResult, TurnCommit};

/// One run's write: its step result, the lease its turn ran under, how many times the run was
/// claimed when its cache was taken, the turn's commit (one that fits one statement: see
/// [`crate::store::postgres::turn::is_one_statement`]), and when.
pub(crate) type StepWrite = (StepResult, Claim, u32, TurnCommit, Millis);

/// The key two writes of one statement must not share: a run moves once per statement.
pub(crate) fn run_of(write: &StepWrite) -> &str {
    write.0.run_id.as_str()
}

/// One run's write, alone: [`crate::store::postgres::result::apply_result_and_commit`].
pub(crate) fn apply_result_and_commit<'c>(
    conn: &'c mut PgConnection,
    (result, lease, attempt, commit, now): &'c StepWrite,
) -> BoxFuture<'c, StoreResult<Option<Committed>>> {
    Box::pin(crate::store::postgres::result::apply_result_and_commit(
        conn, result, lease, *attempt, commit, *now,
    ))
}

/// Applies `writes` (of distinct runs) in one statement, then reads what each moved run's next
/// turn needs; each write's outcome, in order, `None` for a run it did not move, an error for a
/// run moved whose reads then failed.
pub(crate) fn apply_results_and_commit<'c>(
    conn: &'c mut PgConnection,
    writes: Vec<&'c StepWrite>,
) -> BoxFuture<'c, Outcomes<Committed>> {
    Box::pin(async move {
        let rows = statement(&writes).fetch_all(&mut *conn).await.map_err(db)?;
        // The statement stands from here on: a failure is each write's, never the statement's.
        let moved = match moved_runs(&rows, writes.len()) {
            Ok(moved) => moved,
            Err(e) => return Ok(each_failed(writes.len(), &e)),
        };
        let mut outcomes = Vec::with_capacity(writes.len());
        for (write, run) in writes.iter().zip(moved) {
            let (result, lease, _, commit, now) = write;
            outcomes.push(match run {
                Some(run) => finish(conn, run, &result.run_id, &lease.owner, commit, *now).await,
                None => Ok(None),
            });
        }
        Ok(outcomes)
    })
}

/// The run each write moved, by the write's position, from the statement's rows.
fn moved_runs(rows: &[PgRow], writes: usize) -> StoreResult<Vec<Option<Run>>> {
    let corrupt = |e: sqlx::Error| StoreError::Corrupt(e.to_string());
    let mut moved = vec![None; writes];
    for row in rows {
        let k: i32 = sqlx::Row::try_get(row, RUN_COL_COUNT).map_err(corrupt)?;
        let recorded: i64 = sqlx::Row::try_get(row, RUN_COL_COUNT + 1).map_err(corrupt)?;
        let run = run_from_row(row)?;
        if recorded == 0 {
            // Cannot happen: a run moves only if its result's step still waits.
            return Err(StoreError::Corrupt(format!(
                "run `{}` moved without recording the result it was moved for",
                run.id
            )));
        }
        let slot = usize::try_from(k)
            .ok()
            .and_then(|k| moved.get_mut(k))
            .ok_or_else(|| StoreError::Corrupt(format!("merged write answered {k}")))?;
        *slot = Some(run);
    }
    Ok(moved)
}

/// The statement, its arrays bound.
fn statement<'q>(writes: &[&'q StepWrite]) -> PgQuery<'q> {
    let mut runs = StepArrays::default();
    let mut cps = CheckpointArrays::default();
    for (k, (result, lease, attempt, commit, now)) in writes.iter().enumerate() {
        let update = run_update(&commit.outcome, *now);
        let (status, output, error) = columns::<PgConnection>(result);
        runs.push(StepValues {
            id: result.run_id.as_str().to_owned(),
            status: update.status.as_str(),
            wake_at: update.wake_at,
            now: *now,
            output: update.output,
            error: update.error.map(|e| to_value(&e)),
            until: lease.until,
            finished_at: update.finished_at,
            owner: lease.owner.clone(),
            attempt: *attempt as i32,
            namespace: lease.scope.namespace().map(|ns| ns.as_str().to_owned()),
            result_status: status.as_str(),
            result_output: output,
            result_error: error,
            started_at: result.started_at,
            seq: result.seq as i32,
            k: k as i32,
        });
        for cp in &commit.checkpoints {
            cps.push(CheckpointValues::of(&result.run_id, cp, Some(&lease.owner)));
        }
    }
    cps.bind(runs.bind(sqlx::query(&SQL)))
}

row_values! {
    /// One run's parameters: those of the one-run statement, and its write's position `k`, to
    /// answer it. `namespace` is the lease's scope, `None` for every namespace.
    StepValues,
    /// Every run's parameters, an element per run: the columns of [`SQL`]'s `a`.
    StepArrays {
        id: String as "TEXT",
        status: &'static str as "TEXT",
        wake_at: Option<Millis> as "BIGINT",
        now: Millis as "BIGINT",
        output: Option<Value> as "JSONB",
        error: Option<Value> as "JSONB",
        until: Millis as "BIGINT",
        finished_at: Option<Millis> as "BIGINT",
        owner: String as "TEXT",
        attempt: i32 as "INT",
        namespace: Option<String> as "TEXT",
        result_status: &'static str as "TEXT",
        result_output: Option<Value> as "JSONB",
        result_error: Option<Value> as "JSONB",
        started_at: Option<Millis> as "BIGINT",
        seq: i32 as "INT",
        k: i32 as "INT",
    }
}

/// The merged statement. `a` holds a row per run (its columns prefixed `x_` so that bare names
/// are the tables'); `w` locks each run's waiting step; `r` moves each untouched run whose step
/// still waits, as [`crate::store::postgres::fused`]'s `update_run_sql` does for one (a run woken meanwhile stays
/// `running` under the lease); `c` records the results of the runs `r` moved; `i` inserts
/// their new checkpoints. It answers each moved run, its write's position and whether its
/// result was recorded.
static SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    let woken = "a.x_status = 'suspended' AND (needs_wake OR \
                 (a.x_wake_at IS NOT NULL AND a.x_wake_at <= a.x_now))";
    let waiting = waiting_step_sql("a.x_id", "a.x_seq");
    let columns: Vec<String> = StepValues::COLUMNS
        .iter()
        .map(|c| format!("x_{c}"))
        .collect();
    let columns: Vec<&str> = columns.iter().map(String::as_str).collect();
    let steps = unnest(&columns, StepValues::TYPES, 1, "a");
    let inserts = insert_checkpoints(1 + StepValues::COLUMNS.len());
    format!(
        "WITH a AS (SELECT * FROM {steps}), \
         w AS (SELECT a.x_id FROM checkpoints, a WHERE {waiting} FOR UPDATE OF checkpoints), \
         r AS (UPDATE runs SET \
         status = CASE WHEN {woken} THEN 'running' ELSE a.x_status END, \
         output = a.x_output, error = a.x_error, \
         wake_at = CASE WHEN {woken} THEN NULL ELSE a.x_wake_at END, \
         attempt = attempt + 1 + (CASE WHEN {woken} THEN 1 ELSE 0 END), \
         locked_until = CASE WHEN {woken} THEN a.x_until ELSE NULL END, \
         locked_by = CASE WHEN {woken} THEN a.x_owner ELSE NULL END, \
         needs_wake = FALSE, recoveries = 0, updated_at = a.x_now, finished_at = a.x_finished_at \
         FROM a WHERE id = a.x_id AND status = 'suspended' AND NOT needs_wake \
         AND attempt = a.x_attempt AND (a.x_namespace IS NULL OR namespace = a.x_namespace \
         OR (a.x_namespace = 'default' AND (namespace IS NULL OR namespace = ''))) \
         AND a.x_id IN (SELECT x_id FROM w) RETURNING {RUN_COLS}, a.x_k), \
         c AS (UPDATE checkpoints SET status = a.x_result_status, output = a.x_result_output, \
         error = a.x_result_error, finished_at = a.x_now, \
         started_at = COALESCE(a.x_started_at, started_at) FROM a \
         WHERE {waiting} AND a.x_id IN (SELECT id FROM r) RETURNING run_id), \
         i AS ({inserts}) \
         SELECT r.*, (SELECT count(*) FROM c WHERE c.run_id = r.id) FROM r"
    )
});
