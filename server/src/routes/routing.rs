//! `/api/v1/routing`: the token's tenant's routing rules, one ordered list replaced whole. Like
//! every API route, the tenant is the bearer token's: a rule can only name the tenant's pools.

use axum::body::Bytes;
use axum::routing::get;
use axum::{Json, Router};
use durable::model::RoutingRules;
use serde_json::{Value, json};

use super::params::json_body;
use crate::error::{ApiError, engine_error};
use crate::state::ServerState;
use crate::tenant_view::TenantView;

/// The routing routes.
pub fn router() -> Router<ServerState> {
    Router::new().route("/routing", get(show).put(replace))
}

/// The rules (`[]` until the tenant sets some) and the definitions version they are at.
async fn show(view: TenantView) -> Result<Json<Value>, ApiError> {
    let (rules, version) = view.routing_rules().await.map_err(engine_error)?;
    let rules = rules.map(|r| r.rules).unwrap_or_default();
    Ok(Json(json!({ "rules": rules, "version": version })))
}

/// `PUT /routing` `{"rules": [...]}`: replaces the list, answering it with its new version.
async fn replace(view: TenantView, body: Bytes) -> Result<Json<Value>, ApiError> {
    let rules: RoutingRules = json_body(&body)?;
    let version = view
        .put_routing_rules(rules.clone())
        .await
        .map_err(engine_error)?;
    Ok(Json(json!({ "rules": rules.rules, "version": version })))
}
