//! Persisting a turn: the run's next status and its checkpoints (in one statement when the
//! commit fits: `fused.rs`), then the rest of the commit as `rules::turn` orders it (resolved
//! waits, children, cancellations, the parent's wait). These are its statements.

use serde_json::Value;
use sqlx::PgConnection;

use super::fused::{
    Holder, fits_one_statement, insert_checkpoint, insert_checkpoints_sql, move_run,
};
use super::reads::history;
use super::rows::{INSERT_RUN, RUN_COLS, db, insert_run, run_by_id, run_from_row};
use super::values::{CheckpointValues, FirstState, RunValues, to_value};
use crate::model::{Millis, Run, RunId, Scope};
use crate::store::rules::settle::child_seq;
use crate::store::rules::turn::{self, TurnStatements, Which};
use crate::store::{
    Claim, Committed, History, NewCheckpoint, NewRun, Redispatch, StoreResult, TurnCommit,
    TurnOutcome,
};

/// [`crate::store::Store::create_run`] inside a transaction: `pending`, or with `lease`
/// (`owner`, `until`) already `running` under it. `None` when the id is taken: one statement
/// that wrote nothing.
pub(super) async fn create_run(
    conn: &mut PgConnection,
    run: &NewRun,
    now: Millis,
    lease: Option<(&str, Millis)>,
) -> StoreResult<Option<Run>> {
    insert_run(conn, run, now, false, lease).await
}

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
    turn::finish(conn, run, id, &lease.owner, commit, now).await
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
    // The run's columns are `$1`..: the checkpoints' parameters follow them.
    let mut next = RunValues::COLUMNS.len() + 1;
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
        turn::finish(conn, inserted, &run.id, &lease.owner, commit, now)
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
    fits_one_statement(commit) && !(ends && child_seq(id).is_some())
}

/// [`crate::store::Store::record_local_step`] inside a transaction; `Some` when it wrote.
pub(super) async fn record_local_step(
    conn: &mut PgConnection,
    scope: &Scope,
    id: &RunId,
    checkpoint: &NewCheckpoint,
) -> StoreResult<Option<()>> {
    let written = turn::record_local_step(conn, scope, id, checkpoint).await?;
    Ok(written.then_some(()))
}

impl TurnStatements for PgConnection {
    async fn mark_redispatched(
        &mut self,
        id: &RunId,
        sent: &Redispatch,
        owner: &str,
        now: Millis,
    ) -> StoreResult<()> {
        sqlx::query(
            "UPDATE checkpoints SET enqueued_at = $1, dispatched_by = $4, worker_group = $5, \
             route = $6 WHERE run_id = $2 AND seq = $3 AND kind = 'remote_step' \
             AND status = 'pending' AND enqueued_at IS NULL",
        )
        .bind(now)
        .bind(id.as_str())
        .bind(sent.seq as i32)
        .bind(owner)
        .bind(&sent.worker_group)
        .bind(sent.route.as_ref().map(to_value))
        .execute(&mut *self)
        .await
        .map_err(db)?;
        Ok(())
    }

    async fn take_signal(
        &mut self,
        id: &RunId,
        signal: i64,
        seq: u32,
    ) -> StoreResult<Option<Value>> {
        sqlx::query_scalar(
            "UPDATE signals SET consumed_seq = $1 WHERE id = $2 AND run_id = $3 \
             AND consumed_seq IS NULL RETURNING payload",
        )
        .bind(seq as i32)
        .bind(signal)
        .bind(id.as_str())
        .fetch_optional(&mut *self)
        .await
        .map_err(db)
    }

    async fn insert_run(
        &mut self,
        run: &NewRun,
        now: Millis,
        keep_existing: bool,
        lease: Option<(&str, Millis)>,
    ) -> StoreResult<Option<Run>> {
        insert_run(self, run, now, keep_existing, lease).await
    }

    async fn insert_checkpoint(&mut self, id: &RunId, cp: &NewCheckpoint) -> StoreResult<bool> {
        insert_checkpoint(self, id, cp, None).await
    }

    async fn run_by_id(&mut self, id: &RunId) -> StoreResult<Option<Run>> {
        run_by_id(self, id).await
    }

    async fn set_attributes(
        &mut self,
        id: &RunId,
        attributes: &serde_json::Map<String, Value>,
    ) -> StoreResult<()> {
        sqlx::query("UPDATE runs SET search_attributes = $2 WHERE id = $1")
            .bind(id.as_str())
            .bind(Value::Object(attributes.clone()))
            .execute(&mut *self)
            .await
            .map_err(db)?;
        Ok(())
    }

    async fn cancel_child(
        &mut self,
        parent: &RunId,
        child: &RunId,
        which: Which,
        error: Value,
        now: Millis,
    ) -> StoreResult<Option<Run>> {
        let which = match which {
            Which::Child => "id = $3",
            Which::Successor => "left(id, length($3) + 2) = $3 || ':c'",
        };
        let row = sqlx::query(&format!(
            "UPDATE runs SET status = CASE WHEN status = 'running' THEN 'cancelling' ELSE 'cancelled' END, \
             error = $1, updated_at = $2, \
             finished_at = CASE WHEN status = 'running' THEN finished_at ELSE $2 END, wake_at = NULL \
             WHERE {which} AND parent_run_id = $4 \
             AND status IN ('pending', 'suspended', 'blocked', 'running') RETURNING {RUN_COLS}"
        ))
        .bind(error)
        .bind(now)
        .bind(child.as_str())
        .bind(parent.as_str())
        .fetch_optional(&mut *self)
        .await
        .map_err(db)?;
        row.as_ref().map(run_from_row).transpose()
    }

    async fn continued(&mut self, parent: &RunId, child: &RunId) -> StoreResult<bool> {
        let row = sqlx::query(
            "SELECT 1 FROM runs WHERE id = $1 AND parent_run_id = $2 AND status = 'continued'",
        )
        .bind(child.as_str())
        .bind(parent.as_str())
        .fetch_optional(&mut *self)
        .await
        .map_err(db)?;
        Ok(row.is_some())
    }

    async fn history(&mut self, id: &RunId) -> StoreResult<History> {
        history(self, id).await
    }
}
