//! Persisting a turn: the run's next status and its checkpoints, then the rest of the commit as
//! `rules::turn` orders it (resolved waits, children, cancellations, the parent's wait), in one
//! write. These are its statements.

use rusqlite::{Connection, params};

use super::reads::history;
use super::rows::{RUN_COLS, insert_run, run_by_id, run_from_row, to_json};
use super::sql::db;
use super::sql::optional;
use super::writer::{Wrote, at_once};
use crate::model::{Millis, Run, RunId, Scope};
use crate::store::rules::turn::{self, TurnStatements, Which, run_update};
use crate::store::{
    Claim, Committed, History, NewCheckpoint, NewRun, Redispatch, StoreResult, TurnCommit,
};

/// [`crate::store::Store::create_run`] inside the writer's transaction: `pending`, or with
/// `lease` (`owner`, `until`) already `running` under it.
pub(super) fn create_run(
    conn: &mut Connection,
    run: &NewRun,
    now: Millis,
    lease: Option<(&str, Millis)>,
) -> StoreResult<Wrote<Run>> {
    let created =
        insert_run(conn, run, now, false, lease)?.ok_or_else(|| turn::id_taken(&run.id))?;
    Ok(Wrote::Keep(created))
}

/// [`crate::store::Store::create_run_and_commit`] inside the writer's transaction: the run
/// inserted claimed under `lease`, then its first turn committed as [`commit_turn`] commits
/// any. Nothing stays written unless the turn commits.
pub(super) fn create_run_and_commit(
    conn: &mut Connection,
    run: &NewRun,
    lease: &Claim,
    commit: &TurnCommit,
    now: Millis,
) -> StoreResult<Wrote<Option<Committed>>> {
    let held = Some((lease.owner.as_str(), lease.until));
    if insert_run(conn, run, now, false, held)?.is_none() {
        return Err(turn::id_taken(&run.id));
    }
    Ok(
        match commit_turn(conn, lease, &run.id, None, commit, now)? {
            Wrote::Keep(Some(committed)) => Wrote::Keep(Some(committed)),
            Wrote::Keep(None) | Wrote::Discard(_) => Wrote::Discard(None),
        },
    )
}

/// [`crate::store::Store::commit_turn`] inside the writer's transaction; `attempt` is `None`
/// for a run the same transaction just claimed or inserted.
pub(super) fn commit_turn(
    conn: &mut Connection,
    lease: &Claim,
    id: &RunId,
    attempt: Option<u32>,
    commit: &TurnCommit,
    now: Millis,
) -> StoreResult<Wrote<Option<Committed>>> {
    let Some(run) = update_run(conn, lease, id, attempt, commit, now)? else {
        return Ok(Wrote::Keep(None));
    };
    insert_checkpoints(conn, id, &commit.checkpoints, Some(&lease.owner))?;
    let committed = at_once(turn::finish(conn, run, id, &lease.owner, commit, now))?;
    Ok(Wrote::unless_none(committed))
}

/// Moves the run to its next status if `lease` still holds it (at `attempt`, if given). A run
/// woken during the turn (a result or signal landed, the timer is already due, or a step try
/// timed out here) stays `running` under the same lease instead of suspending: the caller turns
/// again at once.
fn update_run(
    conn: &Connection,
    lease: &Claim,
    id: &RunId,
    attempt: Option<u32>,
    commit: &TurnCommit,
    now: Millis,
) -> StoreResult<Option<Run>> {
    let row = run_update(&commit.outcome, now);
    let woken = "?1 = 'suspended' AND (needs_wake = 1 OR ?10 OR (?2 IS NOT NULL AND ?2 <= ?3))";
    let sql = format!(
        "UPDATE runs SET \
         status = CASE WHEN {woken} THEN 'running' ELSE ?1 END, \
         output = ?4, error = ?5, \
         wake_at = CASE WHEN {woken} THEN NULL ELSE ?2 END, \
         attempt = attempt + (CASE WHEN {woken} THEN 1 ELSE 0 END), \
         locked_until = CASE WHEN {woken} THEN ?6 ELSE NULL END, \
         locked_by = CASE WHEN {woken} THEN locked_by ELSE NULL END, \
         needs_wake = 0, recoveries = 0, updated_at = ?3, finished_at = ?7 \
         WHERE id = ?8 AND status = 'running' AND locked_by = ?9 \
         AND (?11 IS NULL OR attempt = ?11) RETURNING {RUN_COLS}"
    );
    let mut stmt = conn.prepare_cached(&sql).map_err(db)?;
    let mut rows = stmt
        .query(params![
            row.status.as_str(),
            row.wake_at,
            now,
            row.output.map(|v| to_json(&v)),
            row.error.map(|e| to_json(&e)),
            lease.until,
            row.finished_at,
            id.as_str(),
            lease.owner,
            !commit.timed_out_steps.is_empty(),
            attempt,
        ])
        .map_err(db)?;
    rows.next().map_err(db)?.map(run_from_row).transpose()
}

/// [`crate::store::Store::record_local_step`] inside the writer's transaction.
pub(super) fn record_local_step(
    conn: &mut Connection,
    scope: &Scope,
    id: &RunId,
    checkpoint: &NewCheckpoint,
) -> StoreResult<Wrote<bool>> {
    let written = at_once(turn::record_local_step(conn, scope, id, checkpoint))?;
    Ok(Wrote::Keep(written))
}

/// Inserts `checkpoints`, keeping any already at their position; returns how many were new.
/// Dispatched steps are noted as sent by `owner`.
fn insert_checkpoints(
    conn: &Connection,
    id: &RunId,
    checkpoints: &[NewCheckpoint],
    owner: Option<&str>,
) -> StoreResult<usize> {
    let mut stmt = conn
        .prepare_cached(
            "INSERT INTO checkpoints (run_id, seq, kind, name, status, attempts, worker_group, \
             input, output, error, wake_at, enqueued_at, started_at, finished_at, retry_policy, \
             timeout_ms, priority, slot, saga, route, dispatched_by) \
             VALUES (?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) \
             ON CONFLICT (run_id, seq) DO NOTHING",
        )
        .map_err(db)?;
    let mut written = 0;
    for cp in checkpoints {
        written += stmt
            .execute(params![
                id.as_str(),
                i64::from(cp.seq),
                cp.kind.as_str(),
                cp.name,
                cp.status.as_str(),
                cp.worker_group,
                cp.input.as_ref().map(to_json),
                cp.output.as_ref().map(to_json),
                cp.error.as_ref().map(to_json),
                cp.wake_at,
                cp.enqueued_at,
                cp.started_at,
                cp.finished_at,
                cp.retry_policy.as_ref().map(to_json),
                cp.timeout_ms
                    .map(|ms| i64::try_from(ms).unwrap_or(i64::MAX)),
                cp.priority,
                cp.slot,
                cp.saga.as_ref().map(to_json),
                cp.route.as_ref().map(to_json),
                cp.enqueued_at.and(owner),
            ])
            .map_err(db)?;
    }
    Ok(written)
}

impl TurnStatements for Connection {
    async fn mark_redispatched(
        &mut self,
        id: &RunId,
        sent: &Redispatch,
        owner: &str,
        now: Millis,
    ) -> StoreResult<()> {
        self.prepare_cached(
            "UPDATE checkpoints SET enqueued_at = ?, dispatched_by = ?, worker_group = ?, \
             route = ? WHERE run_id = ? AND seq = ? AND kind = 'remote_step' \
             AND status = 'pending' AND enqueued_at IS NULL",
        )
        .map_err(db)?
        .execute(params![
            now,
            owner,
            sent.worker_group,
            sent.route.as_ref().map(to_json),
            id.as_str(),
            i64::from(sent.seq)
        ])
        .map_err(db)?;
        Ok(())
    }

    async fn take_signal(
        &mut self,
        id: &RunId,
        signal: i64,
        seq: u32,
    ) -> StoreResult<Option<String>> {
        optional(
            self.prepare_cached(
                "UPDATE signals SET consumed_seq = ? WHERE id = ? AND run_id = ? \
                 AND consumed_seq IS NULL RETURNING payload",
            )
            .map_err(db)?
            .query_row(params![i64::from(seq), signal, id.as_str()], |r| r.get(0)),
        )
    }

    async fn insert_run(
        &mut self,
        run: &NewRun,
        now: Millis,
        keep_existing: bool,
        lease: Option<(&str, Millis)>,
    ) -> StoreResult<Option<Run>> {
        insert_run(self, run, now, keep_existing, lease)
    }

    async fn insert_checkpoint(&mut self, id: &RunId, cp: &NewCheckpoint) -> StoreResult<bool> {
        Ok(insert_checkpoints(self, id, std::slice::from_ref(cp), None)? > 0)
    }

    async fn run_by_id(&mut self, id: &RunId) -> StoreResult<Option<Run>> {
        run_by_id(self, id)
    }

    async fn set_attributes(
        &mut self,
        id: &RunId,
        attributes: &serde_json::Map<String, serde_json::Value>,
    ) -> StoreResult<()> {
        self.prepare_cached("UPDATE runs SET search_attributes = ? WHERE id = ?")
            .map_err(db)?
            .execute(params![to_json(attributes), id.as_str()])
            .map_err(db)?;
        // The rows list filters use keep the run's creation time, as at its insert.
        self.prepare_cached("DELETE FROM run_attributes WHERE run_id = ?")
            .map_err(db)?
            .execute(params![id.as_str()])
            .map_err(db)?;
        let mut insert = self
            .prepare_cached(
                "INSERT INTO run_attributes (run_id, namespace, key, value, created_at) \
                 SELECT id, namespace, ?, ?, created_at FROM runs WHERE id = ?",
            )
            .map_err(db)?;
        for (key, value) in attributes {
            insert
                .execute(params![key, value.to_string(), id.as_str()])
                .map_err(db)?;
        }
        Ok(())
    }

    async fn cancel_child(
        &mut self,
        parent: &RunId,
        child: &RunId,
        which: Which,
        error: String,
        now: Millis,
    ) -> StoreResult<Option<Run>> {
        let which = match which {
            Which::Child => "id = ?1",
            Which::Successor => "substr(id, 1, length(?1) + 2) = ?1 || ':c'",
        };
        let sql = format!(
            "UPDATE runs SET status = CASE WHEN status = 'running' THEN 'cancelling' ELSE 'cancelled' END, \
             error = ?2, updated_at = ?3, \
             finished_at = CASE WHEN status = 'running' THEN finished_at ELSE ?3 END, wake_at = NULL \
             WHERE {which} AND parent_run_id = ?4 \
             AND status IN ('pending', 'suspended', 'blocked', 'running') RETURNING {RUN_COLS}"
        );
        let mut stmt = self.prepare_cached(&sql).map_err(db)?;
        let mut rows = stmt
            .query(params![child.as_str(), error, now, parent.as_str()])
            .map_err(db)?;
        rows.next().map_err(db)?.map(run_from_row).transpose()
    }

    async fn continued(&mut self, parent: &RunId, child: &RunId) -> StoreResult<bool> {
        let found: Option<i64> = optional(
            self.prepare_cached(
                "SELECT 1 FROM runs WHERE id = ?1 AND parent_run_id = ?2 AND status = 'continued'",
            )
            .map_err(db)?
            .query_row(params![child.as_str(), parent.as_str()], |r| r.get(0)),
        )?;
        Ok(found.is_some())
    }

    async fn history(&mut self, id: &RunId) -> StoreResult<History> {
        history(self, id)
    }
}
