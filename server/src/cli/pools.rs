//! `durable pool …`: a tenant's worker pools, and with `--shared` the operator's shared pools
//! and their grants, on the database directly. A tenant pool's workers are `durable worker
//! --tenant T --pool NAME`, or SDK workers whose partition is `T.NAME`.

use std::collections::BTreeMap;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use durable::model::{Namespace, Pool, PoolName};

use super::args::operator_engine;

/// `durable pool …`
#[derive(Debug, Args)]
pub struct PoolArgs {
    /// The tenant whose pools these are (with `grant` and `revoke`: the tenant granted to).
    #[arg(long, global = true)]
    tenant: Option<String>,
    /// The operator's shared pools instead of a tenant's (`put`, `list`, `delete`).
    #[arg(long, global = true)]
    shared: bool,
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
    /// Grant a shared pool to the tenant: its steps can be routed there.
    Grant {
        /// The shared pool.
        name: String,
    },
    /// Take a shared pool back from the tenant.
    Revoke {
        /// The shared pool.
        name: String,
    },
}

/// `key=value` labels.
fn labels_of(raw: &[String]) -> anyhow::Result<BTreeMap<String, String>> {
    raw.iter()
        .map(|raw| match raw.split_once('=') {
            Some((k, v)) => Ok((k.trim().to_owned(), v.trim().to_owned())),
            None => bail!("--label takes KEY=VALUE, not `{raw}`"),
        })
        .collect()
}

/// `durable pool --shared …`, and `grant` / `revoke`.
async fn shared(
    engine: &durable::Engine,
    tenant: Option<Namespace>,
    verb: PoolVerb,
) -> anyhow::Result<()> {
    let name_of = |raw: &str| PoolName::parse(raw).map_err(anyhow::Error::from);
    let tenant = || tenant.clone().context("name the tenant with --tenant NAME");
    match verb {
        PoolVerb::Put { name, labels } => {
            let (pool, created) = engine
                .put_shared_pool(name_of(&name)?, labels_of(&labels)?)
                .await?;
            let verb = if created { "created" } else { "changed" };
            println!(
                "shared pool `{}` {verb}: grant it with durable pool grant {} --tenant NAME; its workers are durable worker --pool {}",
                pool.name, pool.name, pool.name
            );
        }
        PoolVerb::List => println!(
            "{}",
            serde_json::to_string_pretty(&engine.shared_pools().await?)?
        ),
        PoolVerb::Delete { name } => {
            let name = name_of(&name)?;
            if !engine.delete_shared_pool(&name).await? {
                bail!("there is no shared pool `{name}`");
            }
            println!("shared pool `{name}` deleted");
        }
        PoolVerb::Grant { name } => {
            let (name, tenant) = (name_of(&name)?, tenant()?);
            engine.grant_pool(&name, &tenant).await?;
            println!("shared pool `{name}` granted to {tenant}: its steps can be routed there");
        }
        PoolVerb::Revoke { name } => {
            let (name, tenant) = (name_of(&name)?, tenant()?);
            if !engine.revoke_pool(&name, &tenant).await? {
                bail!("shared pool `{name}` is not granted to {tenant}");
            }
            println!("shared pool `{name}` taken back from {tenant}");
        }
    }
    Ok(())
}

/// Runs a `durable pool` command against `database_url`.
pub async fn run(database_url: &str, args: PoolArgs) -> anyhow::Result<()> {
    let tenant = args
        .tenant
        .as_deref()
        .map(|t| Namespace::tenant(t).context("invalid --tenant"))
        .transpose()?;
    let engine = operator_engine(database_url, None, durable::EngineConfig::default()).await?;
    if args.shared || matches!(args.verb, PoolVerb::Grant { .. } | PoolVerb::Revoke { .. }) {
        return shared(&engine, tenant, args.verb).await;
    }
    let Some(tenant) = tenant else {
        bail!(
            "name the pool's tenant with --tenant NAME (or --shared for the operator's shared pools)"
        );
    };
    let name_of = |raw: &str| PoolName::parse(raw).map_err(anyhow::Error::from);
    match args.verb {
        PoolVerb::Put { name, labels } => {
            let put = engine
                .put_pool(&tenant, name_of(&name)?, labels_of(&labels)?)
                .await?;
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
        PoolVerb::Grant { .. } | PoolVerb::Revoke { .. } => Ok(()),
    }
}
