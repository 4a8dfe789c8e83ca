//! Plans over the API: the operator token reads and sets any tenant's plan and the default
//! (`/tenants/{tenant}/plan`, `/plans/default`); a tenant token reads its own plan and usage
//! (`/plan`). The tenant in an operator's URL names whose plan to act on; it grants nothing,
//! since the operator token already may act on every tenant's plan.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::routing::get;
use axum::{Json, Router};
use durable::model::{Namespace, Plan, Usage};
use serde::Serialize;

use crate::auth::Operator;
use crate::error::{ApiError, engine_error};
use crate::state::ServerState;
use crate::tenant_view::TenantView;

pub fn router() -> Router<ServerState> {
    Router::new()
        .route("/plan", get(own_plan))
        .route("/plans/default", get(get_default).put(put_default))
        .route("/tenants/{tenant}/plan", get(get_plan).put(put_plan))
}

/// A plan as the API shows it: the fields as set, the plan in force over the default, and,
/// for a tenant, what it uses now.
#[derive(Debug, Serialize)]
struct PlanView {
    #[serde(flatten)]
    own: Plan,
    effective: Plan,
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<Usage>,
}

/// `GET /plan`: the token's tenant's plan in force and its usage.
async fn own_plan(view: TenantView) -> Result<Json<PlanView>, ApiError> {
    let (plan, usage) = view.plan().await.map_err(engine_error)?;
    Ok(Json(PlanView {
        own: plan.clone(),
        effective: plan,
        usage: Some(usage),
    }))
}

fn tenant(raw: &str) -> Result<Namespace, ApiError> {
    Namespace::tenant(raw).map_err(|e| ApiError::BadRequest(format!("tenant `{raw}`: {e}")))
}

/// A plan body: every field optional (`null` or absent: unlimited, or the default's), unknown
/// fields refused.
fn plan_body(body: &Bytes) -> Result<Plan, ApiError> {
    let plan: Plan = serde_json::from_slice(body).map_err(|e| {
        ApiError::BadRequest(format!(
            "invalid plan: {e}; expected an object with max_concurrent_runs, starts_per_minute, max_queued_runs, max_nesting_depth, max_payload_bytes, weight, retention_days, max_pools, max_rules, max_connections and max_priority (each a number or null)"
        ))
    })?;
    plan.validate()
        .map_err(|e| ApiError::BadRequest(e.to_string()))?;
    Ok(plan)
}

async fn show(
    state: &ServerState,
    operator: &Operator,
    tenant: Option<&Namespace>,
) -> Result<Json<PlanView>, ApiError> {
    let (own, effective, usage) = state
        .tenant_views
        .plans(operator)
        .get(tenant)
        .await
        .map_err(engine_error)?;
    Ok(Json(PlanView {
        own,
        effective,
        usage,
    }))
}

async fn get_plan(
    operator: Operator,
    State(state): State<ServerState>,
    Path(raw): Path<String>,
) -> Result<Json<PlanView>, ApiError> {
    let tenant = tenant(&raw)?;
    show(&state, &operator, Some(&tenant)).await
}

async fn put_plan(
    operator: Operator,
    State(state): State<ServerState>,
    Path(raw): Path<String>,
    body: Bytes,
) -> Result<Json<PlanView>, ApiError> {
    let tenant = tenant(&raw)?;
    let plan = plan_body(&body)?;
    state
        .tenant_views
        .plans(&operator)
        .set(Some(&tenant), plan)
        .await
        .map_err(engine_error)?;
    show(&state, &operator, Some(&tenant)).await
}

async fn get_default(
    operator: Operator,
    State(state): State<ServerState>,
) -> Result<Json<PlanView>, ApiError> {
    show(&state, &operator, None).await
}

async fn put_default(
    operator: Operator,
    State(state): State<ServerState>,
    body: Bytes,
) -> Result<Json<PlanView>, ApiError> {
    let plan = plan_body(&body)?;
    state
        .tenant_views
        .plans(&operator)
        .set(None, plan)
        .await
        .map_err(engine_error)?;
    show(&state, &operator, None).await
}
