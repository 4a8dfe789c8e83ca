//! Dashboard users and server settings.

use async_trait::async_trait;
use sqlx::Row;
use sqlx::postgres::PgRow;

use super::PgStore;
use super::rows::db;
use crate::model::{Millis, Namespace, Role};
use crate::store::{Accounts, NewUser, StoreError, StoreResult, User};

const USER_COLS: &str = "id, email, tenant, role, password_hash, session_epoch";

/// How long failed logins are kept.
const DAY_MS: Millis = 86_400_000;

fn user_from_row(row: &PgRow) -> StoreResult<User> {
    let corrupt = |e: sqlx::Error| StoreError::Corrupt(e.to_string());
    let tenant: Option<String> = row.try_get(2).map_err(corrupt)?;
    let role: String = row.try_get(3).map_err(corrupt)?;
    Ok(User {
        id: row.try_get(0).map_err(corrupt)?,
        email: row.try_get(1).map_err(corrupt)?,
        tenant: tenant.map(|t| Namespace::from_stored(Some(&t))),
        role: role.parse::<Role>().map_err(StoreError::Corrupt)?,
        password_hash: row.try_get(4).map_err(corrupt)?,
        session_epoch: row.try_get(5).map_err(corrupt)?,
    })
}

#[async_trait]
impl Accounts for PgStore {
    async fn create_user(&self, user: NewUser, now: Millis) -> StoreResult<User> {
        let row = sqlx::query(&format!(
            "INSERT INTO users (email, tenant, role, password_hash, created_at) \
             VALUES ($1, $2, $3, $4, $5) RETURNING {USER_COLS}"
        ))
        .bind(&user.email)
        .bind(user.tenant.as_ref().map(Namespace::as_str))
        .bind(user.role.as_str())
        .bind(&user.password_hash)
        .bind(now)
        .fetch_one(&self.pool)
        .await
        .map_err(|e| match db(e) {
            StoreError::Conflict(_) => StoreError::Conflict(format!("user `{}`", user.email)),
            other => other,
        })?;
        user_from_row(&row)
    }

    async fn user_by_email(&self, email: &str) -> StoreResult<Option<User>> {
        let row = sqlx::query(&format!("SELECT {USER_COLS} FROM users WHERE email = $1"))
            .bind(email)
            .fetch_optional(&self.pool)
            .await
            .map_err(db)?;
        row.as_ref().map(user_from_row).transpose()
    }

    async fn user_by_id(&self, id: i64) -> StoreResult<Option<User>> {
        let row = sqlx::query(&format!("SELECT {USER_COLS} FROM users WHERE id = $1"))
            .bind(id)
            .fetch_optional(&self.pool)
            .await
            .map_err(db)?;
        row.as_ref().map(user_from_row).transpose()
    }

    async fn count_users(&self) -> StoreResult<u64> {
        let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM users")
            .fetch_one(&self.pool)
            .await
            .map_err(db)?;
        Ok(n as u64)
    }

    async fn bump_session_epoch(&self, id: i64) -> StoreResult<Option<i64>> {
        sqlx::query_scalar(
            "UPDATE users SET session_epoch = session_epoch + 1 WHERE id = $1 \
             RETURNING session_epoch",
        )
        .bind(id)
        .fetch_optional(&self.pool)
        .await
        .map_err(db)
    }

    async fn record_login_failure(&self, keys: &[String], now: Millis) -> StoreResult<()> {
        sqlx::query("DELETE FROM login_failures WHERE key = ANY($1) AND at < $2")
            .bind(keys)
            .bind(now - DAY_MS)
            .execute(&self.pool)
            .await
            .map_err(db)?;
        sqlx::query("INSERT INTO login_failures (key, at) SELECT k, $2 FROM UNNEST($1::text[]) k")
            .bind(keys)
            .bind(now)
            .execute(&self.pool)
            .await
            .map_err(db)?;
        Ok(())
    }

    async fn login_failures(&self, keys: &[String], since: Millis) -> StoreResult<u64> {
        let most: Option<i64> = sqlx::query_scalar(
            "SELECT MAX(n) FROM (SELECT COUNT(*) AS n FROM login_failures \
             WHERE key = ANY($1) AND at >= $2 GROUP BY key) per_key",
        )
        .bind(keys)
        .bind(since)
        .fetch_one(&self.pool)
        .await
        .map_err(db)?;
        Ok(most.unwrap_or(0) as u64)
    }

    async fn clear_login_failures(&self, key: &str) -> StoreResult<()> {
        sqlx::query("DELETE FROM login_failures WHERE key = $1")
            .bind(key)
            .execute(&self.pool)
            .await
            .map_err(db)?;
        Ok(())
    }

    async fn setting_or_insert(&self, key: &str, make: String) -> StoreResult<String> {
        // Two statements: the read must see a row another process inserted after this insert's
        // snapshot (processes starting together all agree on the first value).
        sqlx::query(
            "INSERT INTO settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING",
        )
        .bind(key)
        .bind(make)
        .execute(&self.pool)
        .await
        .map_err(db)?;
        sqlx::query_scalar("SELECT value FROM settings WHERE key = $1")
            .bind(key)
            .fetch_one(&self.pool)
            .await
            .map_err(db)
    }
}
