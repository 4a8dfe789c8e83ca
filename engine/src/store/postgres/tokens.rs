//! API tokens.

use async_trait::async_trait;
use sqlx::Row;
use sqlx::postgres::PgRow;

use super::PgStore;
use super::rows::db;
use crate::model::{ApiToken, Millis, Namespace, TokenScope};
use crate::store::{ApiTokens, NewToken, StoreError, StoreResult};

const TOKEN_COLS: &str = "id, tenant, name, scope, created_at, expires_at, revoked_at";

fn token_from_row(row: &PgRow) -> StoreResult<ApiToken> {
    let corrupt = |e: sqlx::Error| StoreError::Corrupt(e.to_string());
    let tenant: Option<String> = row.try_get(1).map_err(corrupt)?;
    let scope: String = row.try_get(3).map_err(corrupt)?;
    Ok(ApiToken {
        id: row.try_get(0).map_err(corrupt)?,
        tenant: tenant.map(|t| Namespace::from_stored(Some(&t))),
        name: row.try_get(2).map_err(corrupt)?,
        scope: scope.parse::<TokenScope>().map_err(StoreError::Corrupt)?,
        created_at: row.try_get(4).map_err(corrupt)?,
        expires_at: row.try_get(5).map_err(corrupt)?,
        revoked_at: row.try_get(6).map_err(corrupt)?,
    })
}

#[async_trait]
impl ApiTokens for PgStore {
    async fn create_token(&self, new: NewToken) -> StoreResult<()> {
        let t = &new.token;
        sqlx::query(
            "INSERT INTO api_tokens (id, tenant, name, scope, secret_hash, created_at, expires_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(&t.id)
        .bind(t.tenant.as_ref().map(Namespace::as_str))
        .bind(&t.name)
        .bind(t.scope.as_str())
        .bind(&new.secret_hash)
        .bind(t.created_at)
        .bind(t.expires_at)
        .execute(&self.pool)
        .await
        .map_err(db)?;
        Ok(())
    }

    async fn token(&self, id: &str) -> StoreResult<Option<(ApiToken, String)>> {
        let row = sqlx::query(&format!(
            "SELECT {TOKEN_COLS}, secret_hash FROM api_tokens WHERE id = $1"
        ))
        .bind(id)
        .fetch_optional(&self.pool)
        .await
        .map_err(db)?;
        match row {
            Some(row) => {
                let hash: String = row
                    .try_get(7)
                    .map_err(|e| StoreError::Corrupt(e.to_string()))?;
                Ok(Some((token_from_row(&row)?, hash)))
            }
            None => Ok(None),
        }
    }

    async fn tokens(&self, tenant: Option<&Namespace>) -> StoreResult<Vec<ApiToken>> {
        let rows = sqlx::query(&format!(
            "SELECT {TOKEN_COLS} FROM api_tokens WHERE tenant IS NOT DISTINCT FROM $1 \
             ORDER BY created_at DESC, id"
        ))
        .bind(tenant.map(Namespace::as_str))
        .fetch_all(&self.pool)
        .await
        .map_err(db)?;
        rows.iter().map(token_from_row).collect()
    }

    async fn revoke_token(
        &self,
        id: &str,
        only: Option<&Namespace>,
        now: Millis,
    ) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE api_tokens SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL \
             AND ($3::text IS NULL OR tenant = $3)",
        )
        .bind(now)
        .bind(id)
        .bind(only.map(Namespace::as_str))
        .execute(&self.pool)
        .await
        .map_err(db)?;
        Ok(done.rows_affected() > 0)
    }
}
