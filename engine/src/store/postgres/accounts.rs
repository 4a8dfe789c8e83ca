//! Dashboard users and server settings.

use async_trait::async_trait;
use sqlx::Row;
use sqlx::postgres::PgRow;

use super::PgStore;
use super::rows::db;
use crate::model::{Millis, Namespace, Role};
use crate::store::{
    AccountChange, Accounts, LoginLimit, NewUser, Reservation, StoreError, StoreResult, User,
};

const USER_COLS: &str = "id, email, tenant, role, password_hash, session_epoch, disabled";

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
        disabled: row.try_get(6).map_err(corrupt)?,
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

    async fn change_account(
        &self,
        email: &str,
        change: AccountChange,
    ) -> StoreResult<Option<User>> {
        let row = sqlx::query(&format!(
            "UPDATE users SET password_hash = COALESCE($2, password_hash), \
             disabled = COALESCE($3, disabled), session_epoch = session_epoch + 1 \
             WHERE email = $1 RETURNING {USER_COLS}"
        ))
        .bind(email)
        .bind(change.password_hash)
        .bind(change.disabled)
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

    async fn reserve_login_attempt(
        &self,
        attempt: &str,
        limits: &[LoginLimit],
        since: Millis,
        now: Millis,
    ) -> StoreResult<Reservation> {
        let mut tx = self.pool.begin().await.map_err(db)?;
        // Each key's count and insert are serialised across processes by a lock on the key,
        // taken in one order so two attempts never wait for each other's.
        let mut keys: Vec<&str> = limits.iter().map(|l| l.key.as_str()).collect();
        keys.sort_unstable();
        keys.dedup();
        for key in &keys {
            sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))")
                .bind(key)
                .execute(&mut *tx)
                .await
                .map_err(db)?;
        }
        sqlx::query("DELETE FROM login_failures WHERE key = ANY($1) AND at < $2")
            .bind(&keys)
            .bind(now - DAY_MS)
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        for limit in limits {
            let failed: i64 = sqlx::query_scalar(
                "SELECT COUNT(*) FROM login_failures WHERE key = $1 AND at >= $2",
            )
            .bind(&limit.key)
            .bind(since)
            .fetch_one(&mut *tx)
            .await
            .map_err(db)?;
            if failed.max(0) as u64 >= limit.allowed {
                tx.rollback().await.map_err(db)?;
                return Ok(Reservation::Refused {
                    key: limit.key.clone(),
                });
            }
        }
        sqlx::query(
            "INSERT INTO login_failures (key, at, attempt) \
             SELECT k, $2, $3 FROM UNNEST($1::text[]) k",
        )
        .bind(&keys)
        .bind(now)
        .bind(attempt)
        .execute(&mut *tx)
        .await
        .map_err(db)?;
        tx.commit().await.map_err(db)?;
        Ok(Reservation::Reserved)
    }

    async fn release_login_attempt(&self, attempt: &str) -> StoreResult<()> {
        sqlx::query("DELETE FROM login_failures WHERE attempt = $1")
            .bind(attempt)
            .execute(&self.pool)
            .await
            .map_err(db)?;
        Ok(())
    }

    async fn clear_login_failures(&self, key: &str) -> StoreResult<()> {
        sqlx::query("DELETE FROM login_failures WHERE key = $1")
            .bind(key)
            .execute(&self.pool)
            .await
            .map_err(db)?;
        Ok(())
    }

    async fn setting(&self, key: &str) -> StoreResult<Option<String>> {
        sqlx::query_scalar("SELECT value FROM settings WHERE key = $1")
            .bind(key)
            .fetch_optional(&self.pool)
            .await
            .map_err(db)
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
