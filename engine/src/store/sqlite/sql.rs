//! A small SQL builder: text with `?` placeholders and the values bound to them, in order, so
//! dynamic filters (scope, status lists, keyset cursors) never splice a value into the text;
//! and how a driver error maps onto a [`StoreError`].

use rusqlite::types::Value;
use rusqlite::{Connection, ErrorCode, OptionalExtension, Params, Row, params_from_iter};

use crate::model::Scope;
use crate::store::rules::statement::Statement;
use crate::store::{StoreError, StoreResult};

/// SQL text and its bound values.
#[derive(Debug, Default)]
pub(super) struct Sql {
    text: String,
    args: Vec<Value>,
}

impl Sql {
    /// Starts with `text`.
    pub(super) fn new(text: impl Into<String>) -> Self {
        Sql {
            text: text.into(),
            args: Vec::new(),
        }
    }

    /// Appends literal SQL.
    pub(super) fn push(&mut self, text: &str) -> &mut Self {
        self.text.push_str(text);
        self
    }

    /// Appends a `?` bound to `value`.
    pub(super) fn bind(&mut self, value: impl Into<Value>) -> &mut Self {
        self.text.push('?');
        self.args.push(value.into());
        self
    }

    /// Appends `?, ?, …` bound to `values`.
    pub(super) fn bind_list<V: Into<Value>>(
        &mut self,
        values: impl IntoIterator<Item = V>,
    ) -> &mut Self {
        for (i, v) in values.into_iter().enumerate() {
            if i > 0 {
                self.text.push_str(", ");
            }
            self.bind(v);
        }
        self
    }

    /// Appends ` AND <namespace matches scope>` for column `col` ([`Statement::scope`]).
    pub(super) fn scope(&mut self, col: &str, scope: &Scope) -> &mut Self {
        Statement::scope(self, col, scope)
    }

    /// Runs it and maps every row.
    pub(super) fn all<T>(
        &self,
        conn: &Connection,
        map: impl Fn(&Row<'_>) -> StoreResult<T>,
    ) -> StoreResult<Vec<T>> {
        let mut stmt = conn.prepare_cached(&self.text).map_err(db)?;
        let mut rows = stmt.query(params_from_iter(&self.args)).map_err(db)?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(db)? {
            out.push(map(row)?);
        }
        Ok(out)
    }

    /// Runs it and maps the first row, if any.
    pub(super) fn one<T>(
        &self,
        conn: &Connection,
        map: impl Fn(&Row<'_>) -> StoreResult<T>,
    ) -> StoreResult<Option<T>> {
        let mut stmt = conn.prepare_cached(&self.text).map_err(db)?;
        let mut rows = stmt.query(params_from_iter(&self.args)).map_err(db)?;
        rows.next().map_err(db)?.map(map).transpose()
    }

    /// Runs it; returns how many rows changed.
    pub(super) fn execute(&self, conn: &Connection) -> StoreResult<u64> {
        let mut stmt = conn.prepare_cached(&self.text).map_err(db)?;
        Ok(stmt.execute(params_from_iter(&self.args)).map_err(db)? as u64)
    }
}

impl Statement for Sql {
    fn push(&mut self, text: &str) -> &mut Self {
        Sql::push(self, text)
    }

    fn bind_int(&mut self, value: i64) -> &mut Self {
        self.bind(value)
    }

    fn bind_text(&mut self, value: String) -> &mut Self {
        self.bind(value)
    }

    fn among(&mut self, col: &str, values: Vec<String>) -> &mut Self {
        Sql::push(self, &format!(" AND {col} IN ("))
            .bind_list(values)
            .push(")")
    }

    fn lock_rows(&mut self) -> &mut Self {
        self
    }
}

/// The `SELECT count(*)` of `sql` (a text shared with PostgreSQL: `$n` placeholders) with
/// `params`, on `conn`.
pub(super) fn count(conn: &Connection, sql: &str, params: impl Params) -> StoreResult<u64> {
    conn.prepare_cached(&sql.replace('$', "?"))
        .map_err(db)?
        .query_row(params, |row| row.get::<_, i64>(0))
        .map(|n| n.max(0) as u64)
        .map_err(db)
}

/// `query_row` that answers `None` for no row.
pub(super) fn optional<T>(result: rusqlite::Result<T>) -> StoreResult<Option<T>> {
    result.optional().map_err(db)
}

/// Maps a driver error: a uniqueness violation is a [`StoreError::Conflict`], a value too big
/// for SQLite (`SQLITE_TOOBIG`) or out of an integer's range is [`StoreError::Refused`],
/// anything else leaves the database unavailable for this call.
pub(super) fn db(e: rusqlite::Error) -> StoreError {
    match &e {
        rusqlite::Error::SqliteFailure(f, msg)
            if f.code == ErrorCode::ConstraintViolation
                && matches!(f.extended_code, 1555 | 2067) =>
        {
            StoreError::Conflict(msg.clone().unwrap_or_else(|| "the row".into()))
        }
        rusqlite::Error::SqliteFailure(f, _) if f.code == ErrorCode::TooBig => {
            StoreError::Refused(e.to_string())
        }
        rusqlite::Error::IntegralValueOutOfRange(..)
        | rusqlite::Error::ToSqlConversionFailure(_) => StoreError::Refused(e.to_string()),
        _ => {
            crate::metrics::store_error("sqlite");
            StoreError::Unavailable(Box::new(e))
        }
    }
}
