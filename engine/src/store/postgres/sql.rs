//! Building statements: sqlx's `QueryBuilder` for text with `$n` placeholders and the values
//! bound to them, so dynamic filters (scope, status lists, keyset cursors) never splice a value
//! into the text, and the scope rule in this dialect.

use sqlx::postgres::PgArguments;
use sqlx::{Postgres, QueryBuilder};

use crate::model::Scope;

/// SQL text and its bound values.
pub(super) type Sql = QueryBuilder<'static, Postgres>;

/// A statement with its binds.
pub(super) type PgQuery<'q> = sqlx::query::Query<'q, Postgres, PgArguments>;

/// Appends ` AND <namespace matches scope>` for column `col`. `default` also matches legacy
/// NULL / `''` rows; [`Scope::All`] adds nothing (no restriction, never `IS NULL`).
pub(super) fn push_scope(sql: &mut Sql, col: &str, scope: &Scope) {
    match scope.namespace() {
        None => {}
        Some(ns) if ns.is_default() => {
            sql.push(default_namespace(col));
        }
        Some(ns) => {
            sql.push(format!(" AND {col} = "));
            sql.push_bind(ns.as_str().to_owned());
        }
    }
}

/// ` AND <col is the default namespace>`: `default`, or a legacy NULL / `''`.
pub(super) fn default_namespace(col: &str) -> String {
    format!(" AND ({col} = 'default' OR {col} IS NULL OR {col} = '')")
}
