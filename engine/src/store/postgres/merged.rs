//! Many runs' step results, each with the turn it wakes, in one statement.
//!
//! In a burst most writes are a step's result and the sticky turn it woke (see
//! [`super::turn::apply_result_and_commit`]). One statement for each costs PostgreSQL far more
//! CPU around the statement (planning, executor start-up, locks) than inside it, so the group
//! commit hands the ones queued together to [`apply_results_and_commit`], which writes them all
//! with one `UPDATE … FROM unnest(…)`: every parameter of the one-run statement becomes an array
//! with an element per run. Each run is moved exactly as the one-run statement moves it: only if
//! it is untouched since its cache was taken and its result's step still waits (whose row is
//! locked first), and nothing is written for a run that is not.

use futures::future::BoxFuture;
use serde_json::Value;
use sqlx::PgConnection;

use super::rows::{RUN_COLS, db, run_from_row, to_value};
use super::settle::{result_columns, waiting_step_sql};
use super::turn::{NEW_CHECKPOINT_COLS, finish_turn};
use crate::model::{Millis, StepResult};
use crate::store::columns::RUN_COL_COUNT;
use crate::store::rules;
use crate::store::{Claim, Committed, StoreError, StoreResult, TurnCommit};

/// One run's write: its step result, the lease its turn ran under, how many times the run was
/// claimed when its cache was taken, the turn's commit (one that fits one statement: see
/// [`super::turn::is_one_statement`]), and when.
pub(super) type StepWrite = (StepResult, Claim, u32, TurnCommit, Millis);

/// The key two writes of one statement must not share: a run moves once per statement.
pub(super) fn run_of(write: &StepWrite) -> &str {
    write.0.run_id.as_str()
}

/// One run's write, alone: [`super::turn::apply_result_and_commit`].
pub(super) fn apply_result_and_commit<'c>(
    conn: &'c mut PgConnection,
    (result, lease, attempt, commit, now): &'c StepWrite,
) -> BoxFuture<'c, StoreResult<Option<Committed>>> {
    Box::pin(super::turn::apply_result_and_commit(
        conn, result, lease, *attempt, commit, *now,
    ))
}

/// Applies `writes` (of distinct runs) in one statement, then reads what each moved run's next
/// turn needs; each write's outcome, in order, `None` for a run it did not move.
pub(super) fn apply_results_and_commit<'c>(
    conn: &'c mut PgConnection,
    writes: Vec<&'c StepWrite>,
) -> BoxFuture<'c, StoreResult<Vec<Option<Committed>>>> {
    Box::pin(async move {
        let rows = statement(&writes).fetch_all(&mut *conn).await.map_err(db)?;
        let mut moved = vec![None; writes.len()];
        for row in &rows {
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
        let mut outcomes = Vec::with_capacity(writes.len());
        for (write, run) in writes.iter().zip(moved) {
            let (result, lease, _, commit, now) = write;
            outcomes.push(match run {
                Some(run) => {
                    finish_turn(conn, run, &result.run_id, &lease.owner, commit, *now).await?
                }
                None => None,
            });
        }
        Ok(outcomes)
    })
}

fn corrupt(e: sqlx::Error) -> StoreError {
    StoreError::Corrupt(e.to_string())
}

/// The statement, its arrays bound.
fn statement<'q>(
    writes: &[&'q StepWrite],
) -> sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments> {
    let mut runs = RunArrays::default();
    let mut cps = CheckpointArrays::default();
    for (k, (result, lease, attempt, commit, now)) in writes.iter().enumerate() {
        let update = rules::run_update(&commit.outcome, *now);
        let (status, output, error) = result_columns(result);
        runs.id.push(result.run_id.as_str().to_owned());
        runs.status.push(update.status.as_str().to_owned());
        runs.wake_at.push(update.wake_at);
        runs.now.push(*now);
        runs.output.push(update.output);
        runs.error.push(update.error.map(|e| to_value(&e)));
        runs.until.push(lease.until);
        runs.finished_at.push(update.finished_at);
        runs.owner.push(lease.owner.clone());
        runs.attempt.push(*attempt as i32);
        runs.namespace
            .push(lease.scope.namespace().map(|ns| ns.as_str().to_owned()));
        runs.result_status.push(status.as_str().to_owned());
        runs.result_output.push(output);
        runs.result_error.push(error);
        runs.started_at.push(result.started_at);
        runs.seq.push(result.seq as i32);
        runs.k.push(k as i32);
        for cp in &commit.checkpoints {
            cps.run_id.push(result.run_id.as_str().to_owned());
            cps.seq.push(cp.seq as i32);
            cps.kind.push(cp.kind.as_str().to_owned());
            cps.name.push(cp.name.clone());
            cps.status.push(cp.status.as_str().to_owned());
            cps.worker_group.push(cp.worker_group.clone());
            cps.input.push(cp.input.clone());
            cps.output.push(cp.output.clone());
            cps.error.push(cp.error.as_ref().map(to_value));
            cps.wake_at.push(cp.wake_at);
            cps.enqueued_at.push(cp.enqueued_at);
            cps.started_at.push(cp.started_at);
            cps.finished_at.push(cp.finished_at);
            cps.retry_policy
                .push(cp.retry_policy.as_ref().map(to_value));
            cps.timeout_ms.push(
                cp.timeout_ms
                    .map(|ms| i64::try_from(ms).unwrap_or(i64::MAX)),
            );
            cps.dispatched_by
                .push(cp.enqueued_at.map(|_| lease.owner.clone()));
        }
    }
    sqlx::query(&SQL)
        .bind(runs.id)
        .bind(runs.status)
        .bind(runs.wake_at)
        .bind(runs.now)
        .bind(runs.output)
        .bind(runs.error)
        .bind(runs.until)
        .bind(runs.finished_at)
        .bind(runs.owner)
        .bind(runs.attempt)
        .bind(runs.namespace)
        .bind(runs.result_status)
        .bind(runs.result_output)
        .bind(runs.result_error)
        .bind(runs.started_at)
        .bind(runs.seq)
        .bind(runs.k)
        .bind(cps.run_id)
        .bind(cps.seq)
        .bind(cps.kind)
        .bind(cps.name)
        .bind(cps.status)
        .bind(cps.worker_group)
        .bind(cps.input)
        .bind(cps.output)
        .bind(cps.error)
        .bind(cps.wake_at)
        .bind(cps.enqueued_at)
        .bind(cps.started_at)
        .bind(cps.finished_at)
        .bind(cps.retry_policy)
        .bind(cps.timeout_ms)
        .bind(cps.dispatched_by)
}

/// Each run's parameters, an element per run, in the order of `a`'s columns in [`SQL`].
#[derive(Default)]
struct RunArrays {
    id: Vec<String>,
    status: Vec<String>,
    wake_at: Vec<Option<Millis>>,
    now: Vec<Millis>,
    output: Vec<Option<Value>>,
    error: Vec<Option<Value>>,
    until: Vec<Millis>,
    finished_at: Vec<Option<Millis>>,
    owner: Vec<String>,
    attempt: Vec<i32>,
    /// The lease's scope: `None` for every namespace.
    namespace: Vec<Option<String>>,
    result_status: Vec<String>,
    result_output: Vec<Option<Value>>,
    result_error: Vec<Option<Value>>,
    started_at: Vec<Option<Millis>>,
    seq: Vec<i32>,
    /// The write's position, to answer it.
    k: Vec<i32>,
}

/// The new checkpoints of every run, an element per checkpoint, in the order of `n`'s columns.
#[derive(Default)]
struct CheckpointArrays {
    run_id: Vec<String>,
    seq: Vec<i32>,
    kind: Vec<String>,
    name: Vec<String>,
    status: Vec<String>,
    worker_group: Vec<Option<String>>,
    input: Vec<Option<Value>>,
    output: Vec<Option<Value>>,
    error: Vec<Option<Value>>,
    wake_at: Vec<Option<Millis>>,
    enqueued_at: Vec<Option<Millis>>,
    started_at: Vec<Option<Millis>>,
    finished_at: Vec<Option<Millis>>,
    retry_policy: Vec<Option<Value>>,
    timeout_ms: Vec<Option<i64>>,
    dispatched_by: Vec<Option<String>>,
}

/// The merged statement. `a` holds a row per run (its columns prefixed `x_` so that bare names
/// are the tables'); `w` locks each run's waiting step; `r` moves each untouched run whose step
/// still waits, as [`super::turn`]'s `update_run_sql` does for one (a run woken meanwhile stays
/// `running` under the lease); `c` records the results of the runs `r` moved; `i` inserts
/// their new checkpoints. It answers each moved run, its write's position and whether its
/// result was recorded.
static SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    let woken = "a.x_status = 'suspended' AND (needs_wake OR \
                 (a.x_wake_at IS NOT NULL AND a.x_wake_at <= a.x_now))";
    let waiting = waiting_step_sql("a.x_id", "a.x_seq");
    format!(
        "WITH a AS (SELECT * FROM unnest($1::TEXT[], $2::TEXT[], $3::BIGINT[], $4::BIGINT[], \
         $5::JSONB[], $6::JSONB[], $7::BIGINT[], $8::BIGINT[], $9::TEXT[], $10::INT[], \
         $11::TEXT[], $12::TEXT[], $13::JSONB[], $14::JSONB[], $15::BIGINT[], $16::INT[], \
         $17::INT[]) AS a(x_id, x_status, x_wake_at, x_now, x_output, x_error, x_until, \
         x_finished_at, x_owner, x_attempt, x_namespace, x_result_status, x_result_output, \
         x_result_error, x_started_at, x_seq, x_k)), \
         w AS (SELECT a.x_id FROM checkpoints, a WHERE {waiting} FOR UPDATE OF checkpoints), \
         r AS (UPDATE runs SET \
         status = CASE WHEN {woken} THEN 'running' ELSE a.x_status END, \
         output = a.x_output, error = a.x_error, \
         wake_at = CASE WHEN {woken} THEN NULL ELSE a.x_wake_at END, \
         attempt = attempt + 1 + (CASE WHEN {woken} THEN 1 ELSE 0 END), \
         locked_until = CASE WHEN {woken} THEN a.x_until ELSE NULL END, \
         locked_by = CASE WHEN {woken} THEN a.x_owner ELSE NULL END, \
         needs_wake = FALSE, updated_at = a.x_now, finished_at = a.x_finished_at \
         FROM a WHERE id = a.x_id AND status = 'suspended' AND NOT needs_wake \
         AND attempt = a.x_attempt AND (a.x_namespace IS NULL OR namespace = a.x_namespace \
         OR (a.x_namespace = 'default' AND (namespace IS NULL OR namespace = ''))) \
         AND a.x_id IN (SELECT x_id FROM w) RETURNING {RUN_COLS}, a.x_k), \
         c AS (UPDATE checkpoints SET status = a.x_result_status, output = a.x_result_output, \
         error = a.x_result_error, finished_at = a.x_now, \
         started_at = COALESCE(a.x_started_at, started_at) FROM a \
         WHERE {waiting} AND a.x_id IN (SELECT id FROM r) RETURNING run_id), \
         i AS (INSERT INTO checkpoints ({NEW_CHECKPOINT_COLS}) \
         SELECT n.run_id, n.seq, n.kind, n.name, n.status, 1, n.worker_group, n.input, \
         n.output, n.error, n.wake_at, n.enqueued_at, n.started_at, n.finished_at, \
         n.retry_policy, n.timeout_ms, n.dispatched_by \
         FROM unnest($18::TEXT[], $19::INT[], $20::TEXT[], $21::TEXT[], $22::TEXT[], \
         $23::TEXT[], $24::JSONB[], $25::JSONB[], $26::JSONB[], $27::BIGINT[], $28::BIGINT[], \
         $29::BIGINT[], $30::BIGINT[], $31::JSONB[], $32::BIGINT[], $33::TEXT[]) \
         AS n(run_id, seq, kind, name, status, worker_group, input, output, error, wake_at, \
         enqueued_at, started_at, finished_at, retry_policy, timeout_ms, dispatched_by) \
         WHERE n.run_id IN (SELECT id FROM r) ON CONFLICT (run_id, seq) DO NOTHING) \
         SELECT r.*, (SELECT count(*) FROM c WHERE c.run_id = r.id) FROM r"
    )
});
