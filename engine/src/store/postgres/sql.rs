//! Building statements: sqlx's `QueryBuilder` for text with `$n` placeholders and the values
//! bound to them, so dynamic filters (scope, status lists, keyset cursors) never splice a value
//! into the text, and the scope rule in this dialect.

use sqlx::postgres::PgArguments;
use sqlx::{Postgres, QueryBuilder};

use crate::model::Scope;
use crate::store::rules::statement::Statement;
pub(super) use crate::store::rules::statement::default_namespace;

/// SQL text and its bound values.
pub(super) type Sql = QueryBuilder<'static, Postgres>;

/// A statement with its binds.
pub(super) type PgQuery<'q> = sqlx::query::Query<'q, Postgres, PgArguments>;

/// Appends ` AND <namespace matches scope>` for column `col` ([`Statement::scope`]).
pub(super) fn push_scope(sql: &mut Sql, col: &str, scope: &Scope) {
    Statement::scope(sql, col, scope);
}

impl Statement for Sql {
    fn push(&mut self, text: &str) -> &mut Self {
        QueryBuilder::push(self, text)
    }

    fn bind_int(&mut self, value: i64) -> &mut Self {
        self.push_bind(value);
        self
    }

    fn bind_text(&mut self, value: String) -> &mut Self {
        self.push_bind(value);
        self
    }

    fn among(&mut self, col: &str, values: Vec<String>) -> &mut Self {
        QueryBuilder::push(self, format!(" AND {col} = ANY("));
        self.push_bind(values);
        QueryBuilder::push(self, ")")
    }

    fn lock_rows(&mut self) -> &mut Self {
        QueryBuilder::push(self, " FOR UPDATE SKIP LOCKED")
    }
}
