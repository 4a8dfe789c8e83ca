//! Dashboard users and server settings.

use async_trait::async_trait;
use sqlx::Row;
use sqlx::sqlite::SqliteRow;

use super::SqliteStore;
use super::rows::db;
use super::writer::Wrote;
use crate::model::{Millis, Namespace, Role};
use crate::store::{Accounts, NewUser, StoreError, StoreResult, User};

fn user_from_row(row: &SqliteRow) -> StoreResult<User> {
    let get = |e: sqlx::Error| StoreError::Corrupt(e.to_string());
    let tenant: Option<String> = row.try_get("tenant").map_err(get)?;
    let role: String = row.try_get("role").map_err(get)?;
    Ok(User {
        id: row.try_get("id").map_err(get)?,
        email: row.try_get("email").map_err(get)?,
        tenant: tenant.map(|t| Namespace::from_stored(Some(&t))),
        role: role.parse::<Role>().map_err(StoreError::Corrupt)?,
        password_hash: row.try_get("password_hash").map_err(get)?,
    })
}

#[async_trait]
impl Accounts for SqliteStore {
    async fn create_user(&self, user: NewUser, now: Millis) -> StoreResult<User> {
        self.writer
            .write(move |conn| {
                Box::pin(async move {
                    let row = sqlx::query(
                        "INSERT INTO users (email, tenant, role, password_hash, created_at) \
                         VALUES (?, ?, ?, ?, ?) RETURNING id, email, tenant, role, password_hash",
                    )
                    .bind(&user.email)
                    .bind(user.tenant.as_ref().map(Namespace::as_str))
                    .bind(user.role.as_str())
                    .bind(&user.password_hash)
                    .bind(now)
                    .fetch_one(&mut *conn)
                    .await
                    .map_err(|e| match db(e) {
                        StoreError::Conflict(_) => {
                            StoreError::Conflict(format!("user `{}`", user.email))
                        }
                        other => other,
                    })?;
                    Ok(Wrote::Keep(user_from_row(&row)?))
                })
            })
            .await
    }

    async fn user_by_email(&self, email: &str) -> StoreResult<Option<User>> {
        let row =
            sqlx::query("SELECT id, email, tenant, role, password_hash FROM users WHERE email = ?")
                .bind(email)
                .fetch_optional(&self.reader)
                .await
                .map_err(db)?;
        row.as_ref().map(user_from_row).transpose()
    }

    async fn user_by_id(&self, id: i64) -> StoreResult<Option<User>> {
        let row =
            sqlx::query("SELECT id, email, tenant, role, password_hash FROM users WHERE id = ?")
                .bind(id)
                .fetch_optional(&self.reader)
                .await
                .map_err(db)?;
        row.as_ref().map(user_from_row).transpose()
    }

    async fn count_users(&self) -> StoreResult<u64> {
        let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM users")
            .fetch_one(&self.reader)
            .await
            .map_err(db)?;
        Ok(n as u64)
    }

    async fn setting_or_insert(&self, key: &str, make: String) -> StoreResult<String> {
        let key = key.to_owned();
        self.writer
            .write(move |conn| {
                Box::pin(async move {
                    sqlx::query(
                        "INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING",
                    )
                    .bind(&key)
                    .bind(make)
                    .execute(&mut *conn)
                    .await
                    .map_err(db)?;
                    let value = sqlx::query_scalar("SELECT value FROM settings WHERE key = ?")
                        .bind(&key)
                        .fetch_one(&mut *conn)
                        .await
                        .map_err(db)?;
                    Ok(Wrote::Keep(value))
                })
            })
            .await
    }
}
