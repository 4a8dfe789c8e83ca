//! Persisting a turn: its checkpoints, resolved waits, children, cancellations and the run's
//! next status, in one transaction (or, when it fits, one statement).

use sqlx::PgConnection;

use super::reads::history;
use super::result::{record_result, record_result_sql, result_columns, waiting_step_sql};
use super::rows::{INSERT_RUN, RUN_COLS, db, insert_run, run_by_id, run_from_row, to_value};
use super::settle::{Resolution, resolve_pending, schedule_retry, settle_parent};
use super::sql::{PgQuery, default_namespace};
use super::values::{CheckpointValues, FirstState, RunValues, params};
use crate::model::{
    CheckpointKind, Millis, Run, RunId, RunStatus, Scope, StepOutcome, StepResult, step_id,
};
use crate::store::columns::RUN_COL_COUNT;
use crate::store::rules::{self, settles_parent};
use crate::store::{Claim, Committed, NewCheckpoint, NewRun, StoreResult, TurnCommit, TurnOutcome};

/// [`crate::store::Store::commit_turn`] inside a transaction. `None` when the lease is gone or
/// the turn's view was stale (a buffered signal it took was taken meanwhile): the caller rolls
/// back.
pub(super) async fn commit_turn(
    conn: &mut PgConnection,
    lease: &Claim,
    id: &RunId,
    attempt: u32,
    commit: &TurnCommit,
    now: Millis,
) -> StoreResult<Option<Committed>> {
    let holder = Holder::Lease { attempt };
    let Some(run) = move_run(conn, lease, id, holder, None, commit, now).await? else {
        return Ok(None);
    };
    finish_turn(conn, run, id, &lease.owner, commit, now).await
}

/// [`crate::store::Store::create_run_and_commit`] inside a transaction: `Some(None)` when the
/// id exists, `None` when the turn's commit was refused (the caller rolls back either way).
///
/// A first turn that only appends a few checkpoints is one statement: the run is inserted as
/// the turn leaves it (not inserted `running` and then moved, which would write the row and all
/// its index entries twice), and the checkpoints with it.
pub(super) async fn create_run_and_commit(
    conn: &mut PgConnection,
    run: &NewRun,
    lease: &Claim,
    commit: &TurnCommit,
    now: Millis,
) -> StoreResult<Option<Option<Committed>>> {
    if !is_one_statement(&run.id, commit) {
        let held = Some((lease.owner.as_str(), lease.until));
        let Some(inserted) = insert_run(conn, run, now, false, held).await? else {
            return Ok(Some(None));
        };
        return Ok(
            commit_turn(conn, lease, &run.id, inserted.attempt, commit, now)
                .await?
                .map(Some),
        );
    }
    let mut next = 23;
    let mut param = || {
        next += 1;
        format!("${}", next - 1)
    };
    let mut sql = format!(
        "WITH r AS ({} ON CONFLICT (id) DO NOTHING RETURNING {RUN_COLS})",
        *INSERT_RUN
    );
    if !commit.checkpoints.is_empty() {
        sql.push_str(&format!(
            ", i AS ({})",
            insert_checkpoints_sql(commit.checkpoints.len(), &mut param)
        ));
    }
    sql.push_str(" SELECT * FROM r");
    let first = FirstState::after_first_turn(commit, lease, now);
    let mut query = RunValues::of(run, now, first).bind(sqlx::query(&sql));
    for cp in &commit.checkpoints {
        query = CheckpointValues::of(&run.id, cp, Some(&lease.owner)).bind(query);
    }
    let Some(inserted) = query.fetch_optional(&mut *conn).await.map_err(db)? else {
        return Ok(Some(None));
    };
    let inserted = run_from_row(&inserted)?;
    Ok(
        finish_turn(conn, inserted, &run.id, &lease.owner, commit, now)
            .await?
            .map(Some),
    )
}

/// Whether the write of turn `commit` of run `id` (with or without the result it carries) is one
/// statement that never backs out after writing, so that alone it needs no transaction (see
/// [`super::writer::Writer::write_as`]): the commit fits one statement, and it does
/// not end a child run, whose parent's wait is settled by further statements.
pub(super) fn is_one_statement(id: &RunId, commit: &TurnCommit) -> bool {
    let ends = matches!(
        commit.outcome,
        TurnOutcome::Complete(_) | TurnOutcome::Fail(_)
    );
    fits_one_statement(commit) && !(ends && rules::child_seq(id).is_some())
}

/// Whether a turn's commit is written in one statement: it only appends, a few checkpoints,
/// and starts no successor.
fn fits_one_statement(commit: &TurnCommit) -> bool {
    commit.only_appends()
        && commit.checkpoints.len() <= FUSED_CHECKPOINTS
        && !matches!(commit.outcome, TurnOutcome::Continue(_))
}

/// `INSERT INTO checkpoints` of `n` new checkpoints, each bound through `param` by
/// [`CheckpointValues::bind`], only if the statement's `r` returned a row; a checkpoint already
/// at its position is kept.
fn insert_checkpoints_sql(n: usize, param: &mut impl FnMut() -> String) -> String {
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

/// The rest of a turn's commit once `run` was moved and its checkpoints written: redispatches
/// (noted as sent by `owner`), resolved waits, children, cancellations and parent, and the
/// history its next turn replays.
pub(super) async fn finish_turn(
    conn: &mut PgConnection,
    run: Run,
    id: &RunId,
    owner: &str,
    commit: &TurnCommit,
    now: Millis,
) -> StoreResult<Option<Committed>> {
    for seq in &commit.redispatched {
        sqlx::query(
            "UPDATE checkpoints SET enqueued_at = $1, dispatched_by = $4 WHERE run_id = $2 \
             AND seq = $3 AND kind = 'remote_step' AND status = 'pending' AND enqueued_at IS NULL",
        )
        .bind(now)
        .bind(id.as_str())
        .bind(*seq as i32)
        .bind(owner)
        .execute(&mut *conn)
        .await
        .map_err(db)?;
    }
    for seq in &commit.fired_timers {
        let fired = Resolution::Completed(None);
        resolve_pending(conn, id, i64::from(*seq), CheckpointKind::Sleep, fired, now).await?;
    }
    for (signal_id, seq) in &commit.consumed_signals {
        let payload: Option<serde_json::Value> = sqlx::query_scalar(
            "UPDATE signals SET consumed_seq = $1 WHERE id = $2 AND run_id = $3 \
             AND consumed_seq IS NULL RETURNING payload",
        )
        .bind(*seq as i32)
        .bind(signal_id)
        .bind(id.as_str())
        .fetch_optional(&mut *conn)
        .await
        .map_err(db)?;
        let Some(payload) = payload else {
            // Taken by another wait meanwhile: this turn's view was stale; discard it.
            return Ok(None);
        };
        let got = Resolution::Completed(Some(payload));
        resolve_pending(conn, id, i64::from(*seq), CheckpointKind::Signal, got, now).await?;
    }
    for seq in &commit.timed_out_signals {
        let timed_out = Resolution::Failed(to_value(&rules::signal_timed_out()));
        resolve_pending(
            conn,
            id,
            i64::from(*seq),
            CheckpointKind::Signal,
            timed_out,
            now,
        )
        .await?;
    }
    for seq in &commit.timed_out_steps {
        time_out_step(conn, id, *seq, now).await?;
    }
    for child in &commit.children {
        if insert_run(conn, child, now, true, None).await?.is_none()
            && let Some(existing) = run_by_id(conn, &child.id).await?
            && existing.status.is_terminal()
        {
            // A retried parent re-issued a child that already ended: settle the new wait now.
            settle_parent(conn, id, &existing, now).await?;
        }
    }
    if let TurnOutcome::Continue(next) = &commit.outcome {
        insert_run(conn, next, now, true, None).await?;
    }
    let mut cancelled = Vec::new();
    for child in &commit.cancel_runs {
        // Only this run's own children, never anything else. A child that continued as new is
        // cancelled as its live successor (`<child>:c<n>`): looked for only once the child is
        // seen `continued`, in a statement of its own, so a successor whose insert committed
        // while the first statement waited for the child's row is seen too.
        let mut row = cancel_child(conn, id, child, "id = $3", now).await?;
        if row.is_none() && continued(conn, id, child).await? {
            let successor = "left(id, length($3) + 2) = $3 || ':c'";
            row = cancel_child(conn, id, child, successor, now).await?;
        }
        if let Some(child) = row {
            if settles_parent(child.status) {
                settle_parent(conn, id, &child, now).await?;
            }
            cancelled.push(child.id);
        }
    }
    if let (Some(parent), true) = (&run.parent_run_id, settles_parent(run.status)) {
        settle_parent(conn, parent, &run, now).await?;
    }
    // A suspended run's history after a commit that only appends is derived by the caller.
    let history = match run.status {
        RunStatus::Running => Some(history(conn, id).await?),
        RunStatus::Suspended if !commit.only_appends() => Some(history(conn, id).await?),
        _ => None,
    };
    Ok(Some(Committed {
        run,
        history,
        cancelled,
    }))
}

/// [`crate::store::Store::record_local_step`] inside a transaction; `Some` when it wrote.
pub(super) async fn record_local_step(
    conn: &mut PgConnection,
    scope: &Scope,
    id: &RunId,
    checkpoint: &NewCheckpoint,
) -> StoreResult<Option<()>> {
    let open = run_by_id(conn, id)
        .await?
        .is_some_and(|run| scope.admits(&run.namespace) && !run.status.is_terminal());
    let written = open && insert_checkpoint(conn, id, checkpoint, None).await?;
    Ok(written.then_some(()))
}

/// Inserts `cp`, keeping any checkpoint already at its position; whether it was new. A
/// dispatched step is noted as sent by `owner`.
async fn insert_checkpoint(
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

/// How many new checkpoints a turn may have for its write to be one statement.
const FUSED_CHECKPOINTS: usize = 8;

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
            && record_result(conn, result, now).await?.is_none()
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
        let (status, output, error) = result_columns(result);
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
    let recorded: i64 = sqlx::Row::try_get(&row, RUN_COL_COUNT)
        .map_err(|e| crate::store::StoreError::Corrupt(e.to_string()))?;
    if recorded == 0 {
        // Cannot happen (the gate above), and inside a transaction it is backed out anyway.
        return Err(crate::store::StoreError::Corrupt(format!(
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

/// Cancels the live child of run `parent` that `which` (a condition on `$3`, the child's id)
/// picks: waiting, it ends `cancelled`; running, it goes `cancelling`.
async fn cancel_child(
    conn: &mut PgConnection,
    parent: &RunId,
    child: &RunId,
    which: &str,
    now: Millis,
) -> StoreResult<Option<Run>> {
    let row = sqlx::query(&format!(
        "UPDATE runs SET status = CASE WHEN status = 'running' THEN 'cancelling' ELSE 'cancelled' END, \
         error = $1, updated_at = $2, \
         finished_at = CASE WHEN status = 'running' THEN finished_at ELSE $2 END, wake_at = NULL \
         WHERE {which} AND parent_run_id = $4 \
         AND status IN ('pending', 'suspended', 'blocked', 'running') RETURNING {RUN_COLS}"
    ))
    .bind(to_value(&rules::sibling_failed(parent)))
    .bind(now)
    .bind(child.as_str())
    .bind(parent.as_str())
    .fetch_optional(&mut *conn)
    .await
    .map_err(db)?;
    row.as_ref().map(run_from_row).transpose()
}

/// Whether `child`, a child of `parent`, continued as new.
async fn continued(conn: &mut PgConnection, parent: &RunId, child: &RunId) -> StoreResult<bool> {
    let row = sqlx::query(
        "SELECT 1 FROM runs WHERE id = $1 AND parent_run_id = $2 AND status = 'continued'",
    )
    .bind(child.as_str())
    .bind(parent.as_str())
    .fetch_optional(&mut *conn)
    .await
    .map_err(db)?;
    Ok(row.is_some())
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
    let rules::RunUpdate {
        status,
        output,
        error,
        wake_at,
        finished_at,
    } = rules::run_update(&commit.outcome, now);
    let mut query = query
        .bind(status.as_str())
        .bind(wake_at)
        .bind(now)
        .bind(output)
        .bind(error.map(|e| to_value(&e)))
        .bind(lease.until)
        .bind(finished_at)
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

/// Fails the current try of remote step `seq` with `timeout`: retried by its policy, or failed
/// for good.
async fn time_out_step(
    conn: &mut PgConnection,
    id: &RunId,
    seq: u32,
    now: Millis,
) -> StoreResult<()> {
    let timeout = rules::step_timed_out(seq);
    let result = StepResult {
        run_id: id.clone(),
        seq,
        step_id: step_id(id, seq),
        started_at: None,
        outcome: StepOutcome::Failed {
            error: timeout.clone(),
        },
    };
    if schedule_retry(conn, &result, &timeout, now)
        .await?
        .is_none()
    {
        let failed = Resolution::Failed(to_value(&timeout));
        resolve_pending(
            conn,
            id,
            i64::from(seq),
            CheckpointKind::RemoteStep,
            failed,
            now,
        )
        .await?;
    }
    Ok(())
}
