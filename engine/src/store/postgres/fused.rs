//! A turn's own write, fused into one statement when the commit fits: the run's
//! compare-and-set move, the step result that woke it (on the sticky path) and the turn's new
//! checkpoints. The hot path of a burst (a step's result and the turn it wakes) is then one
//! round trip; a commit that does not fit makes the same writes statement by statement. What
//! follows the move is `rules::turn`'s.

use sqlx::PgConnection;

use super::rows::{RUN_COLS, db, run_from_row};
use super::sql::{PgQuery, default_namespace};
use super::values::to_value;
use super::values::{CheckpointValues, params};
use crate::model::{Millis, Run, RunId, Scope, StepResult};
use crate::store::columns::RUN_COL_COUNT;
use crate::store::rules::result::{ResultStatements, columns};
use crate::store::rules::turn::run_update;
use crate::store::{Claim, NewCheckpoint, StoreError, StoreResult, TurnCommit, TurnOutcome};

/// Who may move the run in a turn's commit.
#[derive(Clone, Copy)]
pub(super) enum Holder {
    /// The lease holder of a `running` run, claimed `attempt` times when the turn began.
    Lease { attempt: u32 },
    /// Whoever holds the run exactly as the sticky cache left it: `suspended`, not woken since,
    /// claimed `attempt` times, in the lease's scope. It is claimed and moved on in the same
    /// update.
    Untouched { attempt: u32 },
}

/// How many new checkpoints a turn may have for its write to be one statement.
const FUSED_CHECKPOINTS: usize = 8;

/// Whether a turn's commit is written in one statement: it only appends, a few checkpoints,
/// and starts no successor.
pub(super) fn fits_one_statement(commit: &TurnCommit) -> bool {
    commit.only_appends()
        && commit.checkpoints.len() <= FUSED_CHECKPOINTS
        && !matches!(commit.outcome, TurnOutcome::Continue(_))
}

/// Moves the run (see [`update_run`]), records `result` on its checkpoint, and inserts the
/// turn's new checkpoints (the steps it dispatches noted as sent by the lease's owner). A
/// commit that only appends a few checkpoints does all of it in one statement: the hot path of
/// a burst (a step's result and the turn it wakes) is then one round trip. `None` when the run
/// was not held or the result was a duplicate: the caller rolls back.
pub(super) async fn move_run(
    conn: &mut PgConnection,
    lease: &Claim,
    id: &RunId,
    holder: Holder,
    result: Option<&StepResult>,
    commit: &TurnCommit,
    now: Millis,
) -> StoreResult<Option<Run>> {
    if !fits_one_statement(commit) {
        let Some(run) = update_run(conn, lease, id, holder, commit, now).await? else {
            return Ok(None);
        };
        if let Some(result) = result
            && conn.record_result(result, now).await?.is_none()
        {
            return Ok(None);
        }
        for cp in &commit.checkpoints {
            insert_checkpoint(conn, id, cp, Some(&lease.owner)).await?;
        }
        return Ok(Some(run));
    }
    // With a result, the run moves only if the result's step still waits, and that step's row
    // is locked first: the statement then records the result whenever it moves the run, and
    // writes nothing otherwise, so it never needs to be backed out.
    let gate = if result.is_some() {
        " AND EXISTS (SELECT 1 FROM w)"
    } else {
        ""
    };
    let (update, mut next) = update_run_sql(holder, &lease.scope, gate);
    let mut param = || {
        next += 1;
        format!("${}", next - 1)
    };
    let mut sql = String::from("WITH ");
    if result.is_some() {
        // Bound after the run's parameters: status, output, error, started_at, seq.
        let [status, output, error, started_at, seq] =
            [param(), param(), param(), param(), param()];
        sql.push_str(&format!(
            "w AS (SELECT 1 FROM checkpoints WHERE {} FOR UPDATE), ",
            waiting_step_sql("$8", &seq)
        ));
        let placeholders = [
            status,
            output,
            error,
            "$3".to_owned(),
            started_at,
            "$8".to_owned(),
            seq,
        ];
        sql.push_str(&format!(
            "r AS ({update}), c AS ({} AND EXISTS (SELECT 1 FROM r) RETURNING 1)",
            record_result_sql(placeholders)
        ));
    } else {
        sql.push_str(&format!("r AS ({update})"));
    }
    if !commit.checkpoints.is_empty() {
        sql.push_str(&format!(
            ", i AS ({})",
            insert_checkpoints_sql(commit.checkpoints.len(), &mut param)
        ));
    }
    let recorded = if result.is_some() {
        "(SELECT count(*) FROM c)"
    } else {
        "1::BIGINT"
    };
    sql.push_str(&format!(" SELECT r.*, {recorded} FROM r"));
    let mut query = bind_update_run(sqlx::query(&sql), lease, id, holder, commit, now);
    if let Some(result) = result {
        let (status, output, error) = columns::<PgConnection>(result);
        query = query
            .bind(status.as_str())
            .bind(output)
            .bind(error)
            .bind(result.started_at)
            .bind(result.seq as i32);
    }
    for cp in &commit.checkpoints {
        query = CheckpointValues::of(id, cp, Some(&lease.owner)).bind(query);
    }
    let Some(row) = query.fetch_optional(&mut *conn).await.map_err(db)? else {
        return Ok(None);
    };
    let recorded: i64 =
        sqlx::Row::try_get(&row, RUN_COL_COUNT).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    if recorded == 0 {
        // Cannot happen (the gate above), and inside a transaction it is backed out anyway.
        return Err(StoreError::Corrupt(format!(
            "run `{id}` moved without recording the result it was moved for"
        )));
    }
    Ok(Some(run_from_row(&row)?))
}

/// Moves the run to its next status if `holder` may (see [`Holder`]); a run woken during the
/// turn stays `running` under the same lease (see the SQLite store for the rule).
async fn update_run(
    conn: &mut PgConnection,
    lease: &Claim,
    id: &RunId,
    holder: Holder,
    commit: &TurnCommit,
    now: Millis,
) -> StoreResult<Option<Run>> {
    let (sql, _) = update_run_sql(holder, &lease.scope, "");
    let query = bind_update_run(sqlx::query(&sql), lease, id, holder, commit, now);
    let row = query.fetch_optional(&mut *conn).await.map_err(db)?;
    row.as_ref().map(run_from_row).transpose()
}

/// The statement of [`update_run`] with `gate` added to its condition, and the number of its
/// first free parameter.
fn update_run_sql(holder: Holder, scope: &Scope, gate: &str) -> (String, usize) {
    let woken = "$1 = 'suspended' AND (needs_wake OR $10 OR ($2::BIGINT IS NOT NULL AND $2 <= $3))";
    // Taking an untouched run counts as one more claim, and it is then held by `lease`.
    let (claimed, held_by, holds, next) = match holder {
        Holder::Lease { .. } => (
            "0",
            "locked_by",
            "status = 'running' AND locked_by = $9 AND attempt = $11".to_owned(),
            12,
        ),
        Holder::Untouched { .. } => (
            "1",
            "$9",
            format!(
                "status = 'suspended' AND NOT needs_wake AND attempt = $11{}",
                scope_clause(scope)
            ),
            if scope_namespace(scope).is_some() {
                13
            } else {
                12
            },
        ),
    };
    let sql = format!(
        "UPDATE runs SET \
         status = CASE WHEN {woken} THEN 'running' ELSE $1 END, \
         output = $4, error = $5, \
         wake_at = CASE WHEN {woken} THEN NULL ELSE $2 END, \
         attempt = attempt + {claimed} + (CASE WHEN {woken} THEN 1 ELSE 0 END), \
         locked_until = CASE WHEN {woken} THEN $6 ELSE NULL END, \
         locked_by = CASE WHEN {woken} THEN {held_by} ELSE NULL END, \
         needs_wake = FALSE, recoveries = 0, updated_at = $3, finished_at = $7 \
         WHERE id = $8 AND {holds}{gate} RETURNING {RUN_COLS}"
    );
    (sql, next)
}

/// Binds the parameters of [`update_run_sql`].
fn bind_update_run<'q>(
    query: PgQuery<'q>,
    lease: &'q Claim,
    id: &'q RunId,
    holder: Holder,
    commit: &TurnCommit,
    now: Millis,
) -> PgQuery<'q> {
    let row = run_update(&commit.outcome, now);
    let mut query = query
        .bind(row.status.as_str())
        .bind(row.wake_at)
        .bind(now)
        .bind(row.output)
        .bind(row.error.map(|e| to_value(&e)))
        .bind(lease.until)
        .bind(row.finished_at)
        .bind(id.as_str())
        .bind(&lease.owner)
        .bind(!commit.timed_out_steps.is_empty());
    match holder {
        Holder::Lease { attempt } => query.bind(attempt as i32),
        Holder::Untouched { attempt } => {
            query = query.bind(attempt as i32);
            if let Some(ns) = scope_namespace(&lease.scope) {
                query = query.bind(ns);
            }
            query
        }
    }
}

/// ` AND <namespace matches scope>` with the namespace as `$12` (see [`scope_namespace`]); the
/// rule of `push_scope`, for a statement with numbered parameters.
fn scope_clause(scope: &Scope) -> String {
    match scope.namespace() {
        None => String::new(),
        Some(ns) if ns.is_default() => default_namespace("namespace"),
        Some(_) => " AND namespace = $12".to_owned(),
    }
}

/// The namespace [`scope_clause`] binds, if it binds one.
fn scope_namespace(scope: &Scope) -> Option<String> {
    scope
        .namespace()
        .filter(|ns| !ns.is_default())
        .map(|ns| ns.as_str().to_owned())
}

/// `INSERT INTO checkpoints` of `n` new checkpoints, each bound through `param` by
/// [`CheckpointValues::bind`], only if the statement's `r` returned a row; a checkpoint already
/// at its position is kept.
pub(super) fn insert_checkpoints_sql(n: usize, param: &mut impl FnMut() -> String) -> String {
    let rows: Vec<String> = (0..n)
        .map(|_| {
            let columns: Vec<String> = CheckpointValues::TYPES
                .iter()
                .map(|t| format!("{}::{t}", param()))
                .collect();
            format!("({})", columns.join(", "))
        })
        .collect();
    format!(
        "INSERT INTO checkpoints ({}) SELECT * FROM (VALUES {}) AS v \
         WHERE EXISTS (SELECT 1 FROM r) ON CONFLICT (run_id, seq) DO NOTHING",
        CheckpointValues::COLUMNS.join(", "),
        rows.join(", ")
    )
}

/// Inserts `cp`, keeping any checkpoint already at its position; whether it was new. A
/// dispatched step is noted as sent by `owner`.
pub(super) async fn insert_checkpoint(
    conn: &mut PgConnection,
    id: &RunId,
    cp: &NewCheckpoint,
    owner: Option<&str>,
) -> StoreResult<bool> {
    let sql = format!(
        "INSERT INTO checkpoints ({}) VALUES ({}) ON CONFLICT (run_id, seq) DO NOTHING",
        CheckpointValues::COLUMNS.join(", "),
        params(CheckpointValues::TYPES, 1, false)
    );
    let done = CheckpointValues::of(id, cp, owner)
        .bind(sqlx::query(&sql))
        .execute(&mut *conn)
        .await
        .map_err(db)?;
    Ok(done.rows_affected() > 0)
}

/// The statement that records a result on its checkpoint, given the placeholders of its status,
/// output, error, finished_at, started_at, run id and seq: only a remote step still waiting
/// takes it.
pub(super) fn record_result_sql(p: [String; 7]) -> String {
    let [status, output, error, finished_at, started_at, run_id, seq] = p;
    format!(
        "UPDATE checkpoints SET status = {status}, output = {output}, error = {error}, \
         finished_at = {finished_at}, started_at = COALESCE({started_at}, started_at) \
         WHERE {}",
        waiting_step_sql(&run_id, &seq)
    )
}

/// The condition on `checkpoints` that picks remote step `seq` of run `run_id` (placeholders)
/// while it still waits for its result (pending or running).
pub(super) fn waiting_step_sql(run_id: &str, seq: &str) -> String {
    format!(
        "run_id = {run_id} AND seq = {seq} AND kind = 'remote_step' \
         AND status IN ('pending', 'running')"
    )
}
