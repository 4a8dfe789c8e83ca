//! Plans on the operator screen: the default plan and each tenant's, every ceiling an input
//! with the tenant's usage beside it. Each plan is one form that works before the wasm loads;
//! a blank field is unset (unlimited on the default plan, the default's on a tenant's).

use durable::model::Plan;
use leptos::prelude::*;

use crate::{AppError, PlanRow};

/// A plan form's fields as typed (`fields[max_concurrent_runs]`, …): blank is unset.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct PlanInput {
    max_concurrent_runs: String,
    starts_per_minute: String,
    max_queued_runs: String,
    max_nesting_depth: String,
    max_payload_bytes: String,
    weight: String,
    retention_days: String,
    max_pools: String,
    max_rules: String,
    max_connections: String,
    max_priority: String,
}

/// Sets the plan of `tenant` (blank: the default plan) from the form's fields. Operators only.
#[server(endpoint = "save_plan")]
pub async fn save_plan(tenant: String, fields: PlanInput) -> Result<(), AppError> {
    crate::ssr::reply(
        async move {
            use durable::model::Namespace;

            use crate::ssr::{Need, SessionView};

            let view = SessionView::open(Need::Operate, None).await?;
            let tenant = match tenant.trim() {
                "" => None,
                name => {
                    Some(Namespace::tenant(name).map_err(|e| AppError::Invalid(e.to_string()))?)
                }
            };
            let plan = Plan {
                max_concurrent_runs: field("max concurrent runs", &fields.max_concurrent_runs)?,
                starts_per_minute: field("starts per minute", &fields.starts_per_minute)?,
                max_queued_runs: field("max queued runs", &fields.max_queued_runs)?,
                max_nesting_depth: field("max nesting depth", &fields.max_nesting_depth)?,
                max_payload_bytes: field("max payload bytes", &fields.max_payload_bytes)?,
                weight: field("weight", &fields.weight)?,
                retention_days: field("retention days", &fields.retention_days)?,
                max_pools: field("max pools", &fields.max_pools)?,
                max_rules: field("max rules", &fields.max_rules)?,
                max_connections: field("max connections", &fields.max_connections)?,
                max_priority: field("max priority", &fields.max_priority)?,
            };
            view.set_plan(tenant.as_ref(), plan).await
        }
        .await,
    )
}

/// A form field: blank is unset, else a whole number.
#[cfg(feature = "ssr")]
fn field<T: std::str::FromStr>(label: &str, raw: &str) -> Result<Option<T>, AppError> {
    match raw.trim() {
        "" => Ok(None),
        n => n.parse().map(Some).map_err(|_| {
            AppError::Invalid(format!(
                "{label} must be a whole number, or blank to leave it unset (not `{n}`)"
            ))
        }),
    }
}

/// The plans section: one form per plan.
#[component]
pub fn PlansSection(plans: Vec<PlanRow>, save: ServerAction<SavePlan>) -> impl IntoView {
    let error = move || {
        save.value()
            .get()
            .and_then(|r| r.err())
            .map(|e| e.to_string())
    };
    let forms = plans
        .into_iter()
        .map(|row| view! { <PlanForm row save new=false /> })
        .collect_view();
    // A tenant without runs or a plan yet gets one here, by name.
    let blank = PlanRow {
        tenant: None,
        own: Plan::default(),
        effective: Plan::default(),
        usage: None,
    };
    view! {
        <section class="mt-6" aria-label="Plans">
            <h2 class="mb-1 text-sm font-semibold">"Plans"</h2>
            <p class="mb-2 text-sm text-slate-600">
                "Ceilings per tenant, with what each uses now. Blank means unlimited on the default plan, and the default's value on a tenant's. A run over the concurrency ceiling waits queued and starts by itself when a slot frees; starts over the rate or queue ceiling are refused with a retry time."
            </p>
            {move || error().map(|e| view! {
                <div class="mb-2 rounded-md border border-red-200 bg-red-50 p-3 text-sm text-red-800" role="alert" data-testid="plan-error">{e}</div>
            })}
            <div class="flex flex-col gap-3">
                {forms}
                <PlanForm row=blank save new=true />
            </div>
        </section>
    }
}

/// One ceiling's input: as set, as in force, and the usage beside it.
struct Field {
    name: &'static str,
    label: &'static str,
    own: Option<u64>,
    effective: Option<u64>,
    used: Option<String>,
}

#[component]
fn PlanForm(row: PlanRow, save: ServerAction<SavePlan>, new: bool) -> impl IntoView {
    let busy = move || save.pending().get();
    let tenant = row
        .tenant
        .as_ref()
        .map(ToString::to_string)
        .unwrap_or_default();
    let title = match (new, tenant.is_empty()) {
        (true, _) => "Another tenant".to_owned(),
        (false, true) => "Default plan".to_owned(),
        (false, false) => tenant.clone(),
    };
    let usage = row.usage.clone();
    let default_of = |own: Option<u64>, effective: Option<u64>| match (own, effective) {
        (None, Some(n)) if !tenant.is_empty() => format!("default: {n}"),
        _ => "unlimited".to_owned(),
    };
    let field =
        |name, label, own: Option<u64>, effective: Option<u64>, used: Option<String>| Field {
            name,
            label,
            own,
            effective,
            used,
        };
    let u32s = |f: fn(&Plan) -> Option<u32>| {
        (f(&row.own).map(u64::from), f(&row.effective).map(u64::from))
    };
    let (running, per_minute, queued) = match &usage {
        Some(u) => (
            Some(format!("{} running", u.running)),
            Some(format!("{} in the last minute", u.started_last_minute)),
            Some(format!("{} queued", u.queued)),
        ),
        None => (None, None, None),
    };
    let (c, r, q, d, w, k, pools, rules, connections, priority) = (
        u32s(|p| p.max_concurrent_runs),
        u32s(|p| p.starts_per_minute),
        u32s(|p| p.max_queued_runs),
        u32s(|p| p.max_nesting_depth),
        u32s(|p| p.weight),
        u32s(|p| p.retention_days),
        u32s(|p| p.max_pools),
        u32s(|p| p.max_rules),
        u32s(|p| p.max_connections),
        u32s(|p| p.max_priority),
    );
    let fields = [
        field(
            "max_concurrent_runs",
            "Max concurrent runs",
            c.0,
            c.1,
            running,
        ),
        field(
            "starts_per_minute",
            "Starts per minute",
            r.0,
            r.1,
            per_minute,
        ),
        field("max_queued_runs", "Max queued runs", q.0, q.1, queued),
        field("max_nesting_depth", "Max nesting depth", d.0, d.1, None),
        field(
            "max_payload_bytes",
            "Max payload bytes",
            row.own.max_payload_bytes,
            row.effective.max_payload_bytes,
            None,
        ),
        field("weight", "Weight", w.0, w.1, None),
        field("retention_days", "History kept (days)", k.0, k.1, None),
        field("max_pools", "Max pools", pools.0, pools.1, None),
        field("max_rules", "Max routing rules", rules.0, rules.1, None),
        field(
            "max_connections",
            "Max connections",
            connections.0,
            connections.1,
            None,
        ),
        field(
            "max_priority",
            "Max step priority",
            priority.0,
            priority.1,
            None,
        ),
    ];
    let inputs = fields
        .into_iter()
        .map(|Field { name, label, own, effective, used }| {
            let placeholder = if name == "weight" && effective.is_none() {
                "1".to_owned()
            } else if name == "retention_days" && effective.is_none() {
                "forever".to_owned()
            } else if name == "max_pools" && effective.is_none() {
                durable::model::DEFAULT_MAX_POOLS.to_string()
            } else if name == "max_rules" && effective.is_none() {
                durable::model::DEFAULT_MAX_RULES.to_string()
            } else if name == "max_connections" && effective.is_none() {
                durable::model::DEFAULT_MAX_CONNECTIONS.to_string()
            } else {
                default_of(own, effective)
            };
            view! {
                <label class="flex flex-col gap-1 text-xs font-medium text-slate-600">
                    {label}
                    <input
                        class="w-36 rounded-md border border-slate-300 px-2 py-1.5 text-sm tabular-nums focus:outline-none focus:ring-2 focus:ring-indigo-500"
                        name=format!("fields[{name}]")
                        inputmode="numeric"
                        pattern="[0-9]*"
                        value=own.map(|n| n.to_string()).unwrap_or_default()
                        placeholder=placeholder
                        data-testid=format!("plan-{name}")
                    />
                    <span class="text-[11px] font-normal text-slate-500" data-testid=format!("usage-{name}")>
                        {used.unwrap_or_default()}
                    </span>
                </label>
            }
        })
        .collect_view();
    view! {
        <ActionForm action=save>
            <div
                class="rounded-lg border border-slate-200 bg-white p-3"
                data-testid=if new { "plan-form-new" } else { "plan-form" }
                data-tenant=tenant.clone()
            >
                <h3 class="mb-2 text-sm font-semibold">{title}</h3>
                <div class="flex flex-wrap items-end gap-3">
                    {if new {
                        view! {
                            <label class="flex flex-col gap-1 text-xs font-medium text-slate-600">
                                "Tenant"
                                <input
                                    class="w-40 rounded-md border border-slate-300 px-2 py-1.5 text-sm focus:outline-none focus:ring-2 focus:ring-indigo-500"
                                    name="tenant"
                                    placeholder="tenant name"
                                    required
                                    data-testid="plan-tenant"
                                />
                                <span class="text-[11px] font-normal text-slate-500">"set its plan"</span>
                            </label>
                        }
                            .into_any()
                    } else {
                        view! { <input type="hidden" name="tenant" value=tenant.clone() /> }.into_any()
                    }}
                    {inputs}
                    <button
                        type="submit"
                        class="rounded-md bg-indigo-700 px-3 py-1.5 text-sm font-medium text-white hover:bg-indigo-800 focus:outline-none focus:ring-2 focus:ring-indigo-500 focus:ring-offset-2 disabled:opacity-60"
                        disabled=busy
                        data-testid="plan-save"
                    >
                        "Save"
                    </button>
                </div>
            </div>
        </ActionForm>
    }
}
