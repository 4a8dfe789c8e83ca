//! `durable tenant plan show|set`: a tenant's plan, or the default plan, on the database
//! directly.

use clap::{Args, Subcommand};
use durable::model::{Namespace, Plan};

use crate::{database, secret};

/// `durable tenant …`
#[derive(Debug, Subcommand)]
pub enum TenantCommand {
    /// Show or set a tenant's plan, or the default plan.
    #[command(subcommand)]
    Plan(PlanCommand),
}

/// `durable tenant plan …`
// Parsed once per command run: the size of the `set` variant's fields costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum PlanCommand {
    /// Print the plan (as set, as in force, and the tenant's usage) as JSON.
    Show {
        /// The tenant; `--default` for the default plan.
        #[arg(required_unless_present = "default", conflicts_with = "default")]
        tenant: Option<String>,
        /// The default plan every tenant's unset fields fall back to.
        #[arg(long)]
        default: bool,
    },
    /// Change some fields of a plan; the others stay as they are.
    Set {
        /// The tenant; `--default` for the default plan.
        #[arg(required_unless_present = "default", conflicts_with = "default")]
        tenant: Option<String>,
        /// The default plan every tenant's unset fields fall back to.
        #[arg(long)]
        default: bool,
        #[command(flatten)]
        fields: PlanFields,
    },
}

/// Plan fields on the command line: a number sets one, `none` unsets it (unlimited on the
/// default plan, the default's on a tenant's).
#[derive(Debug, Args)]
pub struct PlanFields {
    /// Runs started and not ended at once; more wait queued.
    #[arg(long, value_name = "N|none")]
    max_concurrent_runs: Option<String>,
    /// Starts accepted per rolling minute; more get 429.
    #[arg(long, value_name = "N|none")]
    starts_per_minute: Option<String>,
    /// Runs accepted and not yet started; more starts get 429.
    #[arg(long, value_name = "N|none")]
    max_queued_runs: Option<String>,
    /// How deep children may nest.
    #[arg(long, value_name = "N|none")]
    max_nesting_depth: Option<String>,
    /// The largest input or signal payload, in bytes of JSON.
    #[arg(long, value_name = "N|none")]
    max_payload_bytes: Option<String>,
    /// The share of contended capacity (1 to 1000).
    #[arg(long, value_name = "N|none")]
    weight: Option<String>,
    /// Days a finished run is kept before it is deleted (`none`: forever).
    #[arg(long, value_name = "DAYS|none")]
    retention_days: Option<String>,
    /// Worker pools the tenant may define (`none`: 50).
    #[arg(long, value_name = "N|none")]
    max_pools: Option<String>,
    /// Routing rules the tenant's list may hold (`none`: 100).
    #[arg(long, value_name = "N|none")]
    max_rules: Option<String>,
    /// Connections the tenant may keep (`none`: 50).
    #[arg(long, value_name = "N|none")]
    max_connections: Option<String>,
    /// The highest priority its steps may take (`none`: no cap).
    #[arg(long, value_name = "N|none")]
    max_priority: Option<String>,
}

impl PlanFields {
    /// `plan` with these fields changed.
    fn apply(&self, mut plan: Plan) -> anyhow::Result<Plan> {
        fn value<T: std::str::FromStr>(
            flag: &str,
            raw: &Option<String>,
            field: &mut Option<T>,
        ) -> anyhow::Result<()> {
            match raw.as_deref() {
                None => {}
                Some("none") => *field = None,
                Some(n) => {
                    *field = Some(n.parse().map_err(|_| {
                        anyhow::anyhow!("--{flag} takes a whole number or `none`, not `{n}`")
                    })?)
                }
            }
            Ok(())
        }
        value(
            "max-concurrent-runs",
            &self.max_concurrent_runs,
            &mut plan.max_concurrent_runs,
        )?;
        value(
            "starts-per-minute",
            &self.starts_per_minute,
            &mut plan.starts_per_minute,
        )?;
        value(
            "max-queued-runs",
            &self.max_queued_runs,
            &mut plan.max_queued_runs,
        )?;
        value(
            "max-nesting-depth",
            &self.max_nesting_depth,
            &mut plan.max_nesting_depth,
        )?;
        value(
            "max-payload-bytes",
            &self.max_payload_bytes,
            &mut plan.max_payload_bytes,
        )?;
        value("weight", &self.weight, &mut plan.weight)?;
        value(
            "retention-days",
            &self.retention_days,
            &mut plan.retention_days,
        )?;
        value("max-pools", &self.max_pools, &mut plan.max_pools)?;
        value("max-rules", &self.max_rules, &mut plan.max_rules)?;
        value(
            "max-connections",
            &self.max_connections,
            &mut plan.max_connections,
        )?;
        value("max-priority", &self.max_priority, &mut plan.max_priority)?;
        plan.validate()?;
        Ok(plan)
    }
}

/// `durable tenant plan show|set`, on the database directly (a running server sees a change
/// within a second).
pub(super) async fn plan_command(database_url: &str, command: PlanCommand) -> anyhow::Result<()> {
    let (tenant, fields) = match command {
        PlanCommand::Show { tenant, .. } => (tenant, None),
        PlanCommand::Set { tenant, fields, .. } => (tenant, Some(fields)),
    };
    let tenant = tenant.map(|t| Namespace::tenant(&t)).transpose()?;
    let db = database::open_store(database_url).await?;
    let plans = db.store.plans().await?;
    let of = |who: Option<&Namespace>| {
        plans
            .iter()
            .find(|(t, _)| t.as_ref() == who)
            .map(|(_, p)| p.clone())
            .unwrap_or_default()
    };
    let mut own = of(tenant.as_ref());
    if let Some(fields) = fields {
        own = fields.apply(own)?;
        db.store
            .put_plan(tenant.as_ref(), &own, secret::now_ms())
            .await?;
    }
    let effective = own.over(&of(None));
    let mut shown = serde_json::json!({ "plan": own, "effective": effective });
    if let Some(tenant) = &tenant {
        shown["tenant"] = serde_json::json!(tenant);
        shown["usage"] = serde_json::to_value(db.store.usage(tenant, secret::now_ms()).await?)?;
    }
    println!("{}", serde_json::to_string_pretty(&shown)?);
    Ok(())
}
