//! `durable pool …`: a tenant's worker pools, on the database directly. A pool's workers are
//! `durable worker --tenant T --pool NAME`, or SDK workers whose partition is `T.NAME`.

use std::collections::BTreeMap;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use durable::model::{Namespace, Pool, PoolName};

use super::args::operator_engine;

/// `durable pool …`
#[derive(Debug, Args)]
pub struct PoolArgs {
    /// The tenant whose pools these are.
    #[arg(long, global = true)]
    tenant: Option<String>,
    #[command(subcommand)]
    verb: PoolVerb,
}

/// What to do.
#[derive(Debug, Subcommand)]
enum PoolVerb {
    /// Create a pool, or replace the labels of one the tenant has.
    Put {
        /// Its name within the tenant.
        name: String,
        /// A label, `key=value` (repeat it for more).
        #[arg(long = "label", value_name = "KEY=VALUE")]
        labels: Vec<String>,
    },
    /// List the tenant's pools as JSON.
    List,
    /// Delete a pool (steps already sent to it stay in its queue for its workers).
    Delete {
        /// The pool.
        name: String,
    },
}

/// Runs a `durable pool` command against `database_url`.
pub async fn run(database_url: &str, args: PoolArgs) -> anyhow::Result<()> {
    let Some(tenant) = args.tenant.as_deref() else {
        bail!("name the pool's tenant with --tenant NAME");
    };
    let tenant = Namespace::tenant(tenant).context("invalid --tenant")?;
    let engine = operator_engine(database_url, None, durable::EngineConfig::default()).await?;
    let name_of = |raw: &str| PoolName::parse(raw).map_err(anyhow::Error::from);
    match args.verb {
        PoolVerb::Put { name, labels } => {
            let labels = labels
                .iter()
                .map(|raw| match raw.split_once('=') {
                    Some((k, v)) => Ok((k.trim().to_owned(), v.trim().to_owned())),
                    None => bail!("--label takes KEY=VALUE, not `{raw}`"),
                })
                .collect::<anyhow::Result<BTreeMap<_, _>>>()?;
            let put = engine.put_pool(&tenant, name_of(&name)?, labels).await?;
            let verb = if put.created { "created" } else { "changed" };
            println!(
                "pool `{}` {verb}: its workers serve partition `{}` (durable worker --tenant {tenant} --pool {})",
                put.pool.name,
                put.pool.partition(),
                put.pool.name
            );
            Ok(())
        }
        PoolVerb::List => {
            let pools: Vec<Pool> = engine.pools(&tenant).await?;
            println!("{}", serde_json::to_string_pretty(&pools)?);
            Ok(())
        }
        PoolVerb::Delete { name } => {
            let name = name_of(&name)?;
            if engine.delete_pool(&tenant, &name).await? {
                println!("pool `{name}` deleted");
                Ok(())
            } else {
                bail!("tenant {tenant} has no pool `{name}`")
            }
        }
    }
}
