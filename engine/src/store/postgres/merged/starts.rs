//! Many runs' starts, each with its first turn, in one statement.
//!
//! A burst's runs are started all at once, and each start is written with the turn that ran at
//! once (see [`crate::store::postgres::turn::create_run_and_commit`]). The ones queued together
//! are one `INSERT … SELECT … FROM unnest(…)` of every run as its first turn left it, and one of
//! their new checkpoints. A reused id inserts nothing, neither the run nor its checkpoints.

use std::collections::HashMap;

use futures::future::BoxFuture;
use sqlx::PgConnection;
use sqlx::postgres::PgRow;

use super::{Outcomes, each_failed, insert_checkpoints};
use crate::model::{Millis, Run};
use crate::store::postgres::rows::{RUN_COLS, db, run_from_row};
use crate::store::postgres::sql::PgQuery;
use crate::store::postgres::values::{
    CheckpointArrays, CheckpointValues, FirstState, RunArrays, RunValues, unnest,
};
use crate::store::rules::turn::finish;
use crate::store::{Claim, Committed, NewRun, StoreError, StoreResult, TurnCommit};

/// One run's start: the run, the lease its first turn ran under, that turn's commit (one that
/// fits one statement: see [`crate::store::postgres::turn::is_one_statement`]), and when.
pub(crate) type StartWrite = (NewRun, Claim, TurnCommit, Millis);

/// The key two starts of one statement must not share: an id is inserted once per statement.
pub(crate) fn id_of(write: &StartWrite) -> &str {
    write.0.id.as_str()
}

/// One run's start, alone: [`crate::store::postgres::turn::create_run_and_commit`].
pub(crate) fn create_run_and_commit<'c>(
    conn: &'c mut PgConnection,
    (run, lease, commit, now): &'c StartWrite,
) -> BoxFuture<'c, StoreResult<Option<Option<Committed>>>> {
    Box::pin(crate::store::postgres::turn::create_run_and_commit(
        conn, run, lease, commit, *now,
    ))
}

/// Inserts the runs of `writes` (of distinct ids) and their first turns' checkpoints in one
/// statement, then reads what each inserted run's next turn needs. Each write's outcome, in
/// order: `Some(None)` for a reused id, which wrote nothing, as for one start; an error for a
/// run inserted whose reads then failed.
pub(crate) fn create_runs_and_commit<'c>(
    conn: &'c mut PgConnection,
    writes: Vec<&'c StartWrite>,
) -> BoxFuture<'c, Outcomes<Option<Committed>>> {
    Box::pin(async move {
        let rows = statement(&writes).fetch_all(&mut *conn).await.map_err(db)?;
        // The statement stands from here on: a failure is each write's, never the statement's.
        let inserted = match inserted_runs(&rows, &writes) {
            Ok(inserted) => inserted,
            Err(e) => return Ok(each_failed(writes.len(), &e)),
        };
        let mut outcomes = Vec::with_capacity(writes.len());
        for (write, run) in writes.iter().zip(inserted) {
            let (new, lease, commit, now) = write;
            outcomes.push(match run {
                Some(run) => finish(conn, run, &new.id, &lease.owner, commit, *now)
                    .await
                    .map(|committed| committed.map(Some)),
                None => Ok(Some(None)),
            });
        }
        Ok(outcomes)
    })
}

/// The run each write inserted, by the write's position, from the statement's rows.
fn inserted_runs(rows: &[PgRow], writes: &[&StartWrite]) -> StoreResult<Vec<Option<Run>>> {
    let position: HashMap<&str, usize> = writes
        .iter()
        .enumerate()
        .map(|(k, write)| (id_of(write), k))
        .collect();
    let mut inserted = vec![None; writes.len()];
    for row in rows {
        let run = run_from_row(row)?;
        let slot = position
            .get(run.id.as_str())
            .and_then(|&k| inserted.get_mut(k))
            .ok_or_else(|| StoreError::Corrupt(format!("a merged start inserted `{}`", run.id)))?;
        *slot = Some(run);
    }
    Ok(inserted)
}

/// The statement, its arrays bound.
fn statement<'q>(writes: &[&'q StartWrite]) -> PgQuery<'q> {
    let mut runs = RunArrays::default();
    let mut cps = CheckpointArrays::default();
    for (run, lease, commit, now) in writes {
        let first = FirstState::after_first_turn(commit, lease, *now);
        runs.push(RunValues::of(run, *now, first));
        for cp in &commit.checkpoints {
            cps.push(CheckpointValues::of(&run.id, cp, Some(&lease.owner)));
        }
    }
    cps.bind(runs.bind(sqlx::query(&SQL)))
}

/// The merged statement: `r` inserts every run whose id is free (in id order, so that two such
/// statements at once never wait on each other in a cycle), `i` the new checkpoints of the runs
/// `r` inserted. It answers each inserted run.
static SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    let columns = RunValues::COLUMNS.join(", ");
    format!(
        "WITH r AS (INSERT INTO runs ({columns}, needs_wake) SELECT s.*, FALSE FROM {} \
         ORDER BY s.id ON CONFLICT (id) DO NOTHING RETURNING {RUN_COLS}), i AS ({}) \
         SELECT * FROM r",
        unnest(RunValues::COLUMNS, RunValues::TYPES, 1, "s"),
        insert_checkpoints(1 + RunValues::COLUMNS.len())
    )
});
