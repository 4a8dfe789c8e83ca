//! A statement written once for both dialects: the rules push text and bind values through
//! [`Statement`], and each store's builder spells the placeholders its way (`$n` for
//! PostgreSQL, `?` for SQLite), so a statement both stores run exists in one place.

use crate::model::Scope;

/// SQL text under construction and the values bound to it, in order. Implemented by each
/// store's builder; a value is never spliced into the text.
pub(crate) trait Statement {
    /// Appends literal SQL.
    fn push(&mut self, text: &str) -> &mut Self;

    /// Appends a placeholder bound to an integer.
    fn bind_int(&mut self, value: i64) -> &mut Self;

    /// Appends a placeholder bound to a text.
    fn bind_text(&mut self, value: String) -> &mut Self;

    /// Appends ` AND <col> is one of <values>`.
    fn among(&mut self, col: &str, values: Vec<String>) -> &mut Self;

    /// What closes a row-selecting subquery whose rows an update takes: PostgreSQL's
    /// `FOR UPDATE SKIP LOCKED`, so two writers never take the same row; nothing in SQLite,
    /// whose one writer takes them all.
    fn lock_rows(&mut self) -> &mut Self;

    /// Appends ` AND <namespace matches scope>` for column `col`. `default` also matches legacy
    /// NULL / `''` rows; [`Scope::All`] adds nothing (no restriction, never `IS NULL`).
    fn scope(&mut self, col: &str, scope: &Scope) -> &mut Self {
        match scope.namespace() {
            None => self,
            Some(ns) if ns.is_default() => self.push(&default_namespace(col)),
            Some(ns) => self
                .push(&format!(" AND {col} = "))
                .bind_text(ns.as_str().to_owned()),
        }
    }
}

/// ` AND <col is the default namespace>`: `default`, or a legacy NULL / `''`.
pub(crate) fn default_namespace(col: &str) -> String {
    format!(" AND ({col} = 'default' OR {col} IS NULL OR {col} = '')")
}
