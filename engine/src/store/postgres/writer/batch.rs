//! How a lane commits one batch: merged groups first, then the other writes, optimistically in
//! one transaction without savepoints, else with a savepoint per write; writes that lost to
//! another lane run again alone.

use std::any::TypeId;
use std::collections::HashSet;

use futures::future::BoxFuture;
use sqlx::pool::PoolConnection;
// A bare `&str` runs on the simple protocol, so one round trip may carry two statements.
use sqlx::{Connection, Executor, PgConnection, Postgres};

use super::job::{Job, Ran};
use crate::store::postgres::rows::db;
use crate::store::{StoreError, StoreResult};

/// Commits `batch` on `conn` and answers every write in it; writes that lost to a concurrent
/// transaction run again, each alone, afterwards. Gives the connection back unless a
/// transaction on it failed (it may be broken).
pub(super) async fn commit(
    mut conn: PoolConnection<Postgres>,
    mut batch: Vec<Box<dyn Job>>,
) -> Option<PoolConnection<Postgres>> {
    crate::metrics::batch_written("postgres", batch.len());
    let alone = batch.len() == 1;
    if alone && batch[0].one_statement() {
        let mut job = batch.remove(0);
        let ran = job.run(&mut conn).await;
        job.answer(None);
        // A failed statement may have been a broken connection.
        return (ran != Ran::Failed).then_some(conn);
    }
    let mut groups = arrange(&mut batch);
    if groups.first() == Some(&batch.len()) {
        // The whole batch is one statement, which commits itself. If it failed, it wrote
        // nothing, and the writes run one by one below. If it succeeded, it stands, and each
        // write hears its own outcome: an error for one whose reads after it failed, never a
        // second try (which would find its own write in the way).
        if let Ok(read_back) = run_groups(&mut conn, &mut batch, &groups).await {
            for job in batch {
                job.answer(None);
            }
            // A failed read may have been a broken connection.
            return read_back.then_some(conn);
        }
        groups.clear();
    }
    let ran = match run_optimistic(&mut conn, &mut batch, &groups).await {
        Ok(Some(ran)) => Ok(ran),
        Ok(None) => run_batch(&mut conn, &mut batch).await,
        Err(why) => Err(why),
    };
    let ran = match ran {
        Ok(ran) => ran,
        Err(why) => {
            tracing::warn!(error = %why, writes = batch.len(), "a group write transaction failed; its writes were rolled back");
            let why = why.to_string();
            for job in batch {
                job.answer(Some(&why));
            }
            return None;
        }
    };
    let mut again = Vec::new();
    for (job, ran) in batch.into_iter().zip(ran) {
        match ran {
            Ran::Contended if !alone => again.push(job),
            _ => job.answer(None),
        }
    }
    let mut healthy = true;
    for mut job in again {
        match run_batch(&mut conn, std::slice::from_mut(&mut job)).await {
            Ok(_) => job.answer(None),
            Err(why) => {
                healthy = false;
                job.answer(Some(&why.to_string()));
            }
        }
    }
    healthy.then_some(conn)
}

/// Puts the writes that share a statement first, each kind's together, and the others after
/// them; the lengths of those groups. A kind with one write queued, and a write whose key is
/// already in its kind's group, are not merged. (Reordering is safe: writes queued together were
/// sent concurrently, and a run's row lock orders any two that touch it.)
fn arrange(batch: &mut Vec<Box<dyn Job>>) -> Vec<usize> {
    let mut groups: Vec<(TypeId, Vec<Box<dyn Job>>)> = Vec::new();
    let mut keys: HashSet<(TypeId, String)> = HashSet::new();
    let mut singles = Vec::new();
    for job in batch.drain(..) {
        let kind = job
            .merge()
            .and_then(|(kind, _, key)| keys.insert((kind, key.to_owned())).then_some(kind));
        match (kind, groups.iter_mut().find(|(k, _)| Some(*k) == kind)) {
            (Some(_), Some((_, jobs))) => jobs.push(job),
            (Some(kind), None) => groups.push((kind, vec![job])),
            (None, _) => singles.push(job),
        }
    }
    let mut spans = Vec::new();
    let mut lone = Vec::new();
    for (_, jobs) in groups {
        if jobs.len() > 1 {
            spans.push(jobs.len());
            batch.extend(jobs);
        } else {
            lone.extend(jobs);
        }
    }
    batch.extend(lone);
    batch.extend(singles);
    spans
}

/// Runs the merged groups at the front of `batch` (of lengths `groups`), each as one statement:
/// whether every write's reads after its statement succeeded, or why a statement failed.
fn run_groups<'a>(
    conn: &'a mut PgConnection,
    batch: &'a mut [Box<dyn Job>],
    groups: &'a [usize],
) -> BoxFuture<'a, StoreResult<bool>> {
    Box::pin(async move {
        let mut start = 0;
        let mut read_back = true;
        for &len in groups {
            let jobs = &mut batch[start..start + len];
            start += len;
            if let Some((_, run, _)) = jobs[0].merge() {
                read_back &= run(&mut *conn, jobs).await?;
            }
        }
        Ok(read_back)
    })
}

/// Runs `batch` in one transaction without savepoints (its merged `groups` first, each as one
/// statement) and commits it if every write kept its changes or wrote nothing (a write its
/// merged statement did not apply, a one-statement write that backed out). `None` otherwise: the transaction was rolled back,
/// nothing was written, and the batch must run with savepoints ([`run_batch`]), one write at a
/// time. A lone write is left to `run_batch`.
fn run_optimistic<'a>(
    conn: &'a mut PgConnection,
    batch: &'a mut [Box<dyn Job>],
    groups: &'a [usize],
) -> BoxFuture<'a, Result<Option<Vec<Ran>>, StoreError>> {
    Box::pin(async move {
        if batch.len() == 1 {
            return Ok(None);
        }
        let mut tx = conn.begin().await.map_err(db)?;
        let merged: usize = groups.iter().sum();
        // Inside a transaction any failure rolls everything back, and the batch runs again.
        if !matches!(
            run_groups(&mut tx, &mut batch[..merged], groups).await,
            Ok(true)
        ) {
            tx.rollback().await.map_err(db)?;
            return Ok(None);
        }
        for job in batch[merged..].iter_mut() {
            match job.run(&mut tx).await {
                Ran::Keep => {}
                // A one-statement write that backs out wrote nothing: nothing to undo.
                Ran::Discard if job.one_statement() => {}
                _ => {
                    tx.rollback().await.map_err(db)?;
                    return Ok(None);
                }
            }
        }
        tx.commit().await.map_err(db)?;
        Ok(Some(vec![Ran::Keep; batch.len()]))
    })
}

/// Runs `batch` in one transaction; how each write went, or why the transaction failed (then
/// nothing in it was written). A lone write needs no savepoint: backing it out is rolling the
/// transaction back.
fn run_batch<'a>(
    conn: &'a mut PgConnection,
    batch: &'a mut [Box<dyn Job>],
) -> BoxFuture<'a, Result<Vec<Ran>, StoreError>> {
    // Boxed so the future is `Send` for `tokio::spawn` (sqlx's executors are higher-ranked).
    Box::pin(async move {
        let mut tx = conn.begin().await.map_err(db)?;
        let guarded = batch.len() > 1;
        let mut ran = Vec::with_capacity(batch.len());
        for (i, job) in batch.iter_mut().enumerate() {
            if guarded {
                // One round trip: the previous write's savepoint is folded into the transaction.
                let mark = if i == 0 {
                    "SAVEPOINT job"
                } else {
                    "RELEASE SAVEPOINT job; SAVEPOINT job"
                };
                (&mut *tx).execute(mark).await.map_err(db)?;
            }
            let this = job.run(&mut tx).await;
            if guarded && this != Ran::Keep {
                (&mut *tx)
                    .execute("ROLLBACK TO SAVEPOINT job")
                    .await
                    .map_err(db)?;
            }
            ran.push(this);
        }
        if ran.contains(&Ran::Keep) {
            tx.commit().await.map_err(db)?;
        } else {
            tx.rollback().await.map_err(db)?;
        }
        Ok(ran)
    })
}
