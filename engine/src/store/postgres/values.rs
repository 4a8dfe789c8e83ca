//! What a new run's and a new checkpoint's columns hold, in one place, whether they are bound
//! for one row or gathered into arrays for a statement that writes many (`… FROM unnest(…)`).
//!
//! Each row type lists its columns once: the list gives the row's values, its arrays, the
//! column names and their SQL types, so a statement that inserts one row and one that inserts
//! many can never disagree on how a run or checkpoint is stored.

use serde_json::Value;

use super::sql::PgQuery;
use crate::model::{Millis, RunId, RunStatus};
use crate::store::rules::turn::first_turn_row;
use crate::store::{Claim, NewCheckpoint, NewRun, TurnCommit};

/// Declares a row type's values (`$values`, bound with `bind`), its arrays (`$arrays`, an
/// element per row, filled with `push` and bound with `bind`), and its column names and SQL
/// types (`$values::COLUMNS`, `$values::TYPES`), from one list of `column: rust type as SQL
/// type`.
macro_rules! row_values {
    (
        $(#[$values_doc:meta])* $values:ident,
        $(#[$arrays_doc:meta])* $arrays:ident {
            $($col:ident: $ty:ty as $sql:literal),+ $(,)?
        }
    ) => {
        $(#[$values_doc])*
        pub(super) struct $values {
            $(pub(super) $col: $ty),+
        }

        impl $values {
            /// The columns, in the order of the fields (and of every bind).
            pub(super) const COLUMNS: &'static [&'static str] = &[$(stringify!($col)),+];
            /// Each column's SQL type.
            pub(super) const TYPES: &'static [&'static str] = &[$($sql),+];

            /// Binds the values, in [`Self::COLUMNS`]' order.
            #[allow(dead_code, reason = "not every row type is also written alone")]
            pub(super) fn bind<'q>(self, query: PgQuery<'q>) -> PgQuery<'q> {
                query$(.bind(self.$col))+
            }
        }

        $(#[$arrays_doc])*
        #[derive(Default)]
        pub(super) struct $arrays {
            $($col: Vec<$ty>),+
        }

        impl $arrays {
            /// Appends one row.
            pub(super) fn push(&mut self, row: $values) {
                $(self.$col.push(row.$col);)+
            }

            /// Binds an array per column, in [`$values::COLUMNS`]' order.
            pub(super) fn bind<'q>(self, query: PgQuery<'q>) -> PgQuery<'q> {
                query$(.bind(self.$col))+
            }
        }
    };
}
pub(super) use row_values;

row_values! {
    /// A new run's row, in the order of [`super::rows::INSERT_RUN`]'s columns.
    RunValues,
    /// Many new runs' rows, a column each.
    RunArrays {
        id: String as "TEXT",
        namespace: String as "TEXT",
        workflow: String as "TEXT",
        workflow_version: i32 as "INT",
        status: &'static str as "TEXT",
        input: Value as "JSONB",
        tags: Value as "JSONB",
        search_attributes: Value as "JSONB",
        parent_run_id: Option<String> as "TEXT",
        root_run_id: String as "TEXT",
        nesting_depth: i32 as "INT",
        retry_of: Option<String> as "TEXT",
        continued_from: Option<String> as "TEXT",
        created_at: Millis as "BIGINT",
        updated_at: Millis as "BIGINT",
        locked_by: Option<String> as "TEXT",
        locked_until: Option<Millis> as "BIGINT",
        attempt: i32 as "INT",
        output: Option<Value> as "JSONB",
        error: Option<Value> as "JSONB",
        wake_at: Option<Millis> as "BIGINT",
        finished_at: Option<Millis> as "BIGINT",
        concurrency_key: Option<String> as "TEXT",
        concurrency_limit: Option<i32> as "INT",
        deadline_at: Option<Millis> as "BIGINT",
        traceparent: Option<String> as "TEXT",
    }
}

row_values! {
    /// A new checkpoint's row.
    CheckpointValues,
    /// Many new checkpoints' rows, a column each.
    CheckpointArrays {
        run_id: String as "TEXT",
        seq: i32 as "INT",
        kind: &'static str as "TEXT",
        name: String as "TEXT",
        status: &'static str as "TEXT",
        attempts: i32 as "INT",
        worker_group: Option<String> as "TEXT",
        input: Option<Value> as "JSONB",
        output: Option<Value> as "JSONB",
        error: Option<Value> as "JSONB",
        wake_at: Option<Millis> as "BIGINT",
        enqueued_at: Option<Millis> as "BIGINT",
        started_at: Option<Millis> as "BIGINT",
        finished_at: Option<Millis> as "BIGINT",
        retry_policy: Option<Value> as "JSONB",
        timeout_ms: Option<i64> as "BIGINT",
        priority: Option<i64> as "BIGINT",
        slot: Option<String> as "TEXT",
        saga: Option<Value> as "JSONB",
        route: Option<Value> as "JSONB",
        dispatched_by: Option<String> as "TEXT",
    }
}

/// The state a new run's row starts in: `pending`, claimed, or as its first turn left it.
pub(super) struct FirstState<'a> {
    pub status: RunStatus,
    /// The lease (`owner`, `until`) holding it, if any.
    pub lease: Option<(&'a str, Millis)>,
    /// How many times it was claimed.
    pub attempt: i32,
    pub output: Option<Value>,
    pub error: Option<Value>,
    pub wake_at: Option<Millis>,
    pub finished_at: Option<Millis>,
}

impl<'a> FirstState<'a> {
    /// `pending`, or with `lease` `running` and claimed once.
    pub(super) fn claimed_by(lease: Option<(&'a str, Millis)>) -> Self {
        FirstState {
            status: if lease.is_some() {
                RunStatus::Running
            } else {
                RunStatus::Pending
            },
            lease,
            attempt: i32::from(lease.is_some()),
            output: None,
            error: None,
            wake_at: None,
            finished_at: None,
        }
    }
}

impl<'a> FirstState<'a> {
    /// As a new run's first turn, `commit` under `lease` at `now`, leaves it (see
    /// [`first_turn_row`]).
    pub(super) fn after_first_turn(commit: &TurnCommit, lease: &'a Claim, now: Millis) -> Self {
        let (row, woken) = first_turn_row(commit, now);
        FirstState {
            status: row.status,
            lease: woken.then_some((lease.owner.as_str(), lease.until)),
            attempt: 1 + i32::from(woken),
            output: row.output,
            error: row.error.map(|e| to_value(&e)),
            wake_at: row.wake_at,
            finished_at: row.finished_at,
        }
    }
}

impl RunValues {
    /// `run`'s row, created at `now`, in state `first`.
    pub(super) fn of(run: &NewRun, now: Millis, first: FirstState<'_>) -> Self {
        RunValues {
            id: run.id.as_str().to_owned(),
            namespace: run.namespace.as_str().to_owned(),
            workflow: run.workflow.clone(),
            workflow_version: run.workflow_version as i32,
            status: first.status.as_str(),
            input: run.input.clone(),
            tags: to_value(&run.tags),
            search_attributes: to_value(&run.search_attributes),
            parent_run_id: run.parent_run_id.as_ref().map(|id| id.as_str().to_owned()),
            root_run_id: run.root_run_id.as_str().to_owned(),
            nesting_depth: run.nesting_depth as i32,
            retry_of: run.retry_of.as_ref().map(|id| id.as_str().to_owned()),
            continued_from: run.continued_from.as_ref().map(|id| id.as_str().to_owned()),
            created_at: now,
            updated_at: now,
            locked_by: first.lease.map(|(owner, _)| owner.to_owned()),
            locked_until: first.lease.map(|(_, until)| until),
            attempt: first.attempt,
            output: first.output,
            error: first.error,
            wake_at: first.wake_at,
            finished_at: first.finished_at,
            concurrency_key: run.concurrency.as_ref().map(|c| c.key.clone()),
            concurrency_limit: run
                .concurrency
                .as_ref()
                .map(|c| i32::try_from(c.limit).unwrap_or(i32::MAX)),
            deadline_at: run.deadline_at,
            traceparent: run.traceparent.clone(),
        }
    }
}

impl CheckpointValues {
    /// `cp`'s row in run `run_id`; a dispatched step is noted as sent by `owner`.
    pub(super) fn of(run_id: &RunId, cp: &NewCheckpoint, owner: Option<&str>) -> Self {
        CheckpointValues {
            run_id: run_id.as_str().to_owned(),
            seq: cp.seq as i32,
            kind: cp.kind.as_str(),
            name: cp.name.clone(),
            status: cp.status.as_str(),
            attempts: 1,
            worker_group: cp.worker_group.clone(),
            input: cp.input.clone(),
            output: cp.output.clone(),
            error: cp.error.as_ref().map(to_value),
            wake_at: cp.wake_at,
            enqueued_at: cp.enqueued_at,
            started_at: cp.started_at,
            finished_at: cp.finished_at,
            retry_policy: cp.retry_policy.as_ref().map(to_value),
            timeout_ms: cp
                .timeout_ms
                .map(|ms| i64::try_from(ms).unwrap_or(i64::MAX)),
            priority: cp.priority,
            slot: cp.slot.clone(),
            saga: cp.saga.as_ref().map(to_value),
            route: cp.route.as_ref().map(to_value),
            dispatched_by: cp.enqueued_at.and(owner).map(str::to_owned),
        }
    }
}

/// `$first::TYPE, $first+1::TYPE, …` for `types`, with `[]` after each type when `arrays`.
pub(super) fn params(types: &[&str], first: usize, arrays: bool) -> String {
    let brackets = if arrays { "[]" } else { "" };
    types
        .iter()
        .enumerate()
        .map(|(k, t)| format!("${}::{t}{brackets}", first + k))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `unnest($first::TYPE[], …) AS alias(columns…)`: a row set of the arrays bound from `$first`.
pub(super) fn unnest(columns: &[&str], types: &[&str], first: usize, alias: &str) -> String {
    format!(
        "unnest({}) AS {alias}({})",
        params(types, first, true),
        columns.join(", ")
    )
}

/// JSON for a bind (serialising plain data cannot fail).
pub(super) fn to_value<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}
