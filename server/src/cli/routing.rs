//! `durable route …`: a tenant's routing rules, on the database directly (a running control
//! plane sees a change within seconds; one started from this command sees it at once).

use std::io::Read;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use durable::model::{Namespace, RoutingRules};

use super::args::operator_engine;

/// `durable route …`
#[derive(Debug, Args)]
pub struct RouteArgs {
    /// The tenant whose rules these are.
    #[arg(long, global = true)]
    tenant: Option<String>,
    #[command(subcommand)]
    verb: RouteVerb,
}

/// What to do.
#[derive(Debug, Subcommand)]
enum RouteVerb {
    /// Replace the tenant's rules with those of a JSON file (`-`: standard input) holding
    /// `{"rules": [{"match": {...}, "pool": "..."}, ..., {"match": {}, "pool": "default"}]}`.
    Set {
        /// The file.
        file: String,
    },
    /// Print the tenant's rules and their version as JSON.
    Show,
}

/// Runs a `durable route` command against `database_url`.
pub async fn run(database_url: &str, args: RouteArgs) -> anyhow::Result<()> {
    let Some(tenant) = args.tenant.as_deref() else {
        bail!("name the tenant with --tenant NAME");
    };
    let tenant = Namespace::tenant(tenant).context("invalid --tenant")?;
    let engine = operator_engine(database_url, None, durable::EngineConfig::default()).await?;
    match args.verb {
        RouteVerb::Set { file } => {
            let mut raw = String::new();
            if file == "-" {
                std::io::stdin().read_to_string(&mut raw)?;
            } else {
                raw = std::fs::read_to_string(&file).with_context(|| format!("reading {file}"))?;
            }
            let rules: RoutingRules = serde_json::from_str(&raw)
                .with_context(|| format!("{file} is not a list of rules"))?;
            let count = rules.rules.len();
            let version = engine.put_routing_rules(&tenant, rules).await?;
            println!("{count} rules saved for tenant {tenant} (definitions version {version})");
            Ok(())
        }
        RouteVerb::Show => {
            let (rules, version) = engine.routing_rules(&tenant).await?;
            let rules = rules.map(|r| r.rules).unwrap_or_default();
            let shown = serde_json::json!({ "rules": rules, "version": version });
            println!("{}", serde_json::to_string_pretty(&shown)?);
            Ok(())
        }
    }
}
