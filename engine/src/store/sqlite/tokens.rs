//! API tokens.

use async_trait::async_trait;
use rusqlite::{Row, params};

use super::SqliteStore;
use super::rows::col;
use super::sql::db;
use super::writer::Wrote;
use crate::model::{ApiToken, Millis, Namespace, TokenScope};
use crate::store::{ApiTokens, NewToken, StoreError, StoreResult};

const TOKEN_COLS: &str = "id, tenant, name, scope, created_at, expires_at, revoked_at";

fn token_from_row(row: &Row<'_>) -> StoreResult<ApiToken> {
    let tenant: Option<String> = col(row, "tenant")?;
    let scope: String = col(row, "scope")?;
    Ok(ApiToken {
        id: col(row, "id")?,
        tenant: tenant.map(|t| Namespace::from_stored(Some(&t))),
        name: col(row, "name")?,
        scope: scope.parse::<TokenScope>().map_err(StoreError::Corrupt)?,
        created_at: col(row, "created_at")?,
        expires_at: col(row, "expires_at")?,
        revoked_at: col(row, "revoked_at")?,
    })
}

#[async_trait]
impl ApiTokens for SqliteStore {
    async fn create_token(&self, new: NewToken) -> StoreResult<()> {
        self.writer
            .write(move |conn| {
                let t = &new.token;
                conn.prepare_cached(
                    "INSERT INTO api_tokens (id, tenant, name, scope, secret_hash, created_at, expires_at) \
                     VALUES (?, ?, ?, ?, ?, ?, ?)",
                )
                .map_err(db)?
                .execute(params![
                    t.id,
                    t.tenant.as_ref().map(Namespace::as_str),
                    t.name,
                    t.scope.as_str(),
                    new.secret_hash,
                    t.created_at,
                    t.expires_at
                ])
                .map_err(db)?;
                Ok(Wrote::Keep(()))
            })
            .await
    }

    async fn token(&self, id: &str) -> StoreResult<Option<(ApiToken, String)>> {
        let id = id.to_owned();
        self.readers
            .read(move |conn| {
                let sql = format!("SELECT {TOKEN_COLS}, secret_hash FROM api_tokens WHERE id = ?");
                let mut stmt = conn.prepare_cached(&sql).map_err(db)?;
                let mut rows = stmt.query([id]).map_err(db)?;
                match rows.next().map_err(db)? {
                    Some(row) => Ok(Some((token_from_row(row)?, col(row, "secret_hash")?))),
                    None => Ok(None),
                }
            })
            .await
    }

    async fn tokens(&self, tenant: Option<&Namespace>) -> StoreResult<Vec<ApiToken>> {
        let tenant = tenant.map(|t| t.as_str().to_owned());
        self.readers
            .read(move |conn| {
                let sql = format!(
                    "SELECT {TOKEN_COLS} FROM api_tokens WHERE tenant IS ? \
                     ORDER BY created_at DESC, id"
                );
                let mut stmt = conn.prepare_cached(&sql).map_err(db)?;
                let mut rows = stmt.query([tenant]).map_err(db)?;
                let mut tokens = Vec::new();
                while let Some(row) = rows.next().map_err(db)? {
                    tokens.push(token_from_row(row)?);
                }
                Ok(tokens)
            })
            .await
    }

    async fn revoke_token(
        &self,
        id: &str,
        only: Option<&Namespace>,
        now: Millis,
    ) -> StoreResult<bool> {
        let id = id.to_owned();
        let only = only.map(|t| t.as_str().to_owned());
        self.writer
            .write(move |conn| {
                let revoked = conn
                    .prepare_cached(
                        "UPDATE api_tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL \
                         AND (? IS NULL OR tenant = ?)",
                    )
                    .map_err(db)?
                    .execute(params![now, id, only, only])
                    .map_err(db)?;
                Ok(Wrote::Keep(revoked > 0))
            })
            .await
    }
}
