//! Dashboard users and server settings.

use async_trait::async_trait;
use rusqlite::{Row, params};

use super::SqliteStore;
use super::rows::{col, db};
use super::sql::optional;
use super::writer::Wrote;
use crate::model::{Millis, Namespace, Role};
use crate::store::{Accounts, NewUser, StoreError, StoreResult, User};

const USER_COLS: &str = "id, email, tenant, role, password_hash";

fn user_from_row(row: &Row<'_>) -> StoreResult<User> {
    let tenant: Option<String> = col(row, "tenant")?;
    let role: String = col(row, "role")?;
    Ok(User {
        id: col(row, "id")?,
        email: col(row, "email")?,
        tenant: tenant.map(|t| Namespace::from_stored(Some(&t))),
        role: role.parse::<Role>().map_err(StoreError::Corrupt)?,
        password_hash: col(row, "password_hash")?,
    })
}

impl SqliteStore {
    async fn user_where(
        &self,
        filter: &'static str,
        key: rusqlite::types::Value,
    ) -> StoreResult<Option<User>> {
        self.readers
            .read(move |conn| {
                let sql = format!("SELECT {USER_COLS} FROM users WHERE {filter} = ?");
                let mut stmt = conn.prepare_cached(&sql).map_err(db)?;
                let mut rows = stmt.query([key]).map_err(db)?;
                rows.next().map_err(db)?.map(user_from_row).transpose()
            })
            .await
    }
}

#[async_trait]
impl Accounts for SqliteStore {
    async fn create_user(&self, user: NewUser, now: Millis) -> StoreResult<User> {
        self.writer
            .write(move |conn| {
                let sql = format!(
                    "INSERT INTO users (email, tenant, role, password_hash, created_at) \
                     VALUES (?, ?, ?, ?, ?) RETURNING {USER_COLS}"
                );
                let mut stmt = conn.prepare_cached(&sql).map_err(db)?;
                let mut rows = stmt
                    .query(params![
                        user.email,
                        user.tenant.as_ref().map(Namespace::as_str),
                        user.role.as_str(),
                        user.password_hash,
                        now
                    ])
                    .map_err(|e| match db(e) {
                        StoreError::Conflict(_) => {
                            StoreError::Conflict(format!("user `{}`", user.email))
                        }
                        other => other,
                    })?;
                let row = rows
                    .next()
                    .map_err(db)?
                    .ok_or_else(|| StoreError::Corrupt("INSERT returned no user".into()))?;
                Ok(Wrote::Keep(user_from_row(row)?))
            })
            .await
    }

    async fn user_by_email(&self, email: &str) -> StoreResult<Option<User>> {
        self.user_where("email", email.to_owned().into()).await
    }

    async fn user_by_id(&self, id: i64) -> StoreResult<Option<User>> {
        self.user_where("id", id.into()).await
    }

    async fn count_users(&self) -> StoreResult<u64> {
        self.readers
            .read(|conn| {
                let n: i64 = conn
                    .query_row("SELECT COUNT(*) FROM users", [], |r| r.get(0))
                    .map_err(db)?;
                Ok(n as u64)
            })
            .await
    }

    async fn setting_or_insert(&self, key: &str, make: String) -> StoreResult<String> {
        let key = key.to_owned();
        self.writer
            .write(move |conn| {
                conn.prepare_cached(
                    "INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING",
                )
                .map_err(db)?
                .execute(params![key, make])
                .map_err(db)?;
                let value = optional(
                    conn.prepare_cached("SELECT value FROM settings WHERE key = ?")
                        .map_err(db)?
                        .query_row([&key], |r| r.get(0)),
                )?
                .ok_or_else(|| StoreError::Corrupt(format!("setting `{key}` vanished")))?;
                Ok(Wrote::Keep(value))
            })
            .await
    }
}
