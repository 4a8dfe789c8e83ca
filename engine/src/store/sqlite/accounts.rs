//! Dashboard users and server settings.

use async_trait::async_trait;
use rusqlite::{Row, params};

use super::SqliteStore;
use super::rows::col;
use super::sql::db;
use super::sql::optional;
use super::writer::Wrote;
use crate::model::{Millis, Namespace, Role};
use crate::store::{
    AccountChange, Accounts, LoginLimit, NewUser, Reservation, StoreError, StoreResult, User,
};

/// How long failed logins are kept.
const DAY_MS: Millis = 86_400_000;

const USER_COLS: &str = "id, email, tenant, role, password_hash, session_epoch, disabled";

fn user_from_row(row: &Row<'_>) -> StoreResult<User> {
    let tenant: Option<String> = col(row, "tenant")?;
    let role: String = col(row, "role")?;
    Ok(User {
        id: col(row, "id")?,
        email: col(row, "email")?,
        tenant: tenant.map(|t| Namespace::from_stored(Some(&t))),
        role: role.parse::<Role>().map_err(StoreError::Corrupt)?,
        password_hash: col(row, "password_hash")?,
        session_epoch: col(row, "session_epoch")?,
        disabled: col(row, "disabled")?,
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

    async fn change_account(
        &self,
        email: &str,
        change: AccountChange,
    ) -> StoreResult<Option<User>> {
        let email = email.to_owned();
        self.writer
            .write(move |conn| {
                let sql = format!(
                    "UPDATE users SET password_hash = COALESCE(?, password_hash), \
                     disabled = COALESCE(?, disabled), session_epoch = session_epoch + 1 \
                     WHERE email = ? RETURNING {USER_COLS}"
                );
                let mut stmt = conn.prepare_cached(&sql).map_err(db)?;
                let mut rows = stmt
                    .query(params![change.password_hash, change.disabled, email])
                    .map_err(db)?;
                let user = rows.next().map_err(db)?.map(user_from_row).transpose()?;
                Ok(Wrote::Keep(user))
            })
            .await
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

    async fn bump_session_epoch(&self, id: i64) -> StoreResult<Option<i64>> {
        self.writer
            .write(move |conn| {
                let epoch = optional(
                    conn.prepare_cached(
                        "UPDATE users SET session_epoch = session_epoch + 1 WHERE id = ? \
                         RETURNING session_epoch",
                    )
                    .map_err(db)?
                    .query_row([id], |r| r.get(0)),
                )?;
                Ok(Wrote::Keep(epoch))
            })
            .await
    }

    async fn reserve_login_attempt(
        &self,
        attempt: &str,
        limits: &[LoginLimit],
        since: Millis,
        now: Millis,
    ) -> StoreResult<Reservation> {
        let attempt = attempt.to_owned();
        let limits = limits.to_vec();
        // One job of the single writer: no other write runs between the count and the insert,
        // and `BEGIN IMMEDIATE` holds the database's write lock against other processes.
        self.writer
            .write(move |conn| {
                for limit in &limits {
                    conn.prepare_cached("DELETE FROM login_failures WHERE key = ? AND at < ?")
                        .map_err(db)?
                        .execute(params![limit.key, now - DAY_MS])
                        .map_err(db)?;
                    let failed: i64 = conn
                        .prepare_cached(
                            "SELECT COUNT(*) FROM login_failures WHERE key = ? AND at >= ?",
                        )
                        .map_err(db)?
                        .query_row(params![limit.key, since], |r| r.get(0))
                        .map_err(db)?;
                    if failed as u64 >= limit.allowed {
                        return Ok(Wrote::Discard(Reservation::Refused {
                            key: limit.key.clone(),
                        }));
                    }
                }
                for limit in &limits {
                    conn.prepare_cached(
                        "INSERT INTO login_failures (key, at, attempt) VALUES (?, ?, ?)",
                    )
                    .map_err(db)?
                    .execute(params![limit.key, now, attempt])
                    .map_err(db)?;
                }
                Ok(Wrote::Keep(Reservation::Reserved))
            })
            .await
    }

    async fn release_login_attempt(&self, attempt: &str) -> StoreResult<()> {
        let attempt = attempt.to_owned();
        self.writer
            .write(move |conn| {
                conn.prepare_cached("DELETE FROM login_failures WHERE attempt = ?")
                    .map_err(db)?
                    .execute([attempt])
                    .map_err(db)?;
                Ok(Wrote::Keep(()))
            })
            .await
    }

    async fn clear_login_failures(&self, key: &str) -> StoreResult<()> {
        let key = key.to_owned();
        self.writer
            .write(move |conn| {
                conn.prepare_cached("DELETE FROM login_failures WHERE key = ?")
                    .map_err(db)?
                    .execute([key])
                    .map_err(db)?;
                Ok(Wrote::Keep(()))
            })
            .await
    }

    async fn setting(&self, key: &str) -> StoreResult<Option<String>> {
        let key = key.to_owned();
        self.readers
            .read(move |conn| {
                optional(
                    conn.prepare_cached("SELECT value FROM settings WHERE key = ?")
                        .map_err(db)?
                        .query_row([&key], |r| r.get(0)),
                )
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
