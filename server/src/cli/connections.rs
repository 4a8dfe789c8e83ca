//! `durable connection …`: a tenant's connections, on the database directly, and the master
//! key's rotation. Secrets are read from a JSON file or standard input (`--spec`), or from
//! flags; a read prints which secrets are set, never their values.

use std::collections::BTreeMap;
use std::io::Read;

use anyhow::{Context, bail};
use clap::{Args, Subcommand, ValueEnum};
use durable::model::{ConnectionKind, ConnectionName, ConnectionSpec, Namespace};
use durable::secrets::MasterKeys;

use super::args::operator_engine;

/// `durable connection …`
#[derive(Debug, Args)]
pub struct ConnectionArgs {
    /// The tenant whose connections these are.
    #[arg(long, global = true)]
    tenant: Option<String>,
    #[command(subcommand)]
    verb: ConnectionVerb,
}

/// A connection's kind, as the flag takes it.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum Kind {
    /// A downstream HTTP API (`durable.http`).
    Http,
    /// Named secret values.
    Secret,
}

/// What to do.
#[derive(Debug, Subcommand)]
enum ConnectionVerb {
    /// Create a connection or change one: secrets named are set (`--unset` removes one), the
    /// others kept.
    Put {
        /// Its name within the tenant.
        name: String,
        /// The whole connection as the API takes it, from a file or `-` for standard input
        /// (keeps secrets out of the shell's history); the flags below add to it.
        #[arg(long, value_name = "FILE|-")]
        spec: Option<String>,
        /// Its kind (default: the spec's, else `http`).
        #[arg(long, value_enum)]
        kind: Option<Kind>,
        /// `http`: the base URL the step's paths are under.
        #[arg(long)]
        base_url: Option<String>,
        /// `http`: a readable header, `NAME=VALUE` (repeat it for more).
        #[arg(long = "header", value_name = "NAME=VALUE")]
        headers: Vec<String>,
        /// `http`: a secret header, `NAME=VALUE`.
        #[arg(long = "secret-header", value_name = "NAME=VALUE")]
        secret_headers: Vec<String>,
        /// `secret`: a secret value, `NAME=VALUE`.
        #[arg(long = "value", value_name = "NAME=VALUE")]
        values: Vec<String>,
        /// A secret field to remove.
        #[arg(long = "unset", value_name = "NAME")]
        unset: Vec<String>,
    },
    /// List the tenant's connections as JSON (no secret values).
    List,
    /// Show one connection as JSON (no secret values).
    Show {
        /// The connection.
        name: String,
    },
    /// Delete a connection.
    Delete {
        /// The connection.
        name: String,
    },
    /// Rewrap every tenant's data key under the master key (DURABLE_MASTER_KEY), opening those
    /// still wrapped by the previous one (DURABLE_MASTER_KEY_PREVIOUS). Run it after every
    /// server has both keys; then remove the previous key.
    RotateKey,
}

fn pairs(flag: &str, raw: &[String]) -> anyhow::Result<BTreeMap<String, String>> {
    raw.iter()
        .map(|pair| match pair.split_once('=') {
            Some((k, v)) => Ok((k.trim().to_owned(), v.to_owned())),
            None => bail!("--{flag} takes NAME=VALUE"),
        })
        .collect()
}

fn read_spec(source: &str) -> anyhow::Result<ConnectionSpec> {
    let text = if source == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("reading the spec from standard input")?;
        text
    } else {
        std::fs::read_to_string(source).with_context(|| format!("reading {source}"))?
    };
    ConnectionSpec::from_json(text.as_bytes()).map_err(anyhow::Error::msg)
}

/// Runs a `durable connection` command against `database_url`.
pub async fn run(database_url: &str, args: ConnectionArgs) -> anyhow::Result<()> {
    let keys = MasterKeys::from_env()?;
    let engine = operator_engine(
        database_url,
        None,
        durable::EngineConfig {
            master_keys: keys,
            ..durable::EngineConfig::default()
        },
    )
    .await?;
    if let ConnectionVerb::RotateKey = args.verb {
        let rotation = engine.rotate_master_key().await?;
        println!(
            "{} data keys rewrapped under the master key, {} already were; every server may now drop DURABLE_MASTER_KEY_PREVIOUS",
            rotation.rewrapped, rotation.current
        );
        return Ok(());
    }
    let Some(tenant) = args.tenant.as_deref() else {
        bail!("name the connection's tenant with --tenant NAME");
    };
    let tenant = Namespace::tenant(tenant).context("invalid --tenant")?;
    let name_of = |raw: &str| ConnectionName::parse(raw).map_err(anyhow::Error::from);
    match args.verb {
        ConnectionVerb::Put {
            name,
            spec,
            kind,
            base_url,
            headers,
            secret_headers,
            values,
            unset,
        } => {
            let mut spec = match spec {
                Some(source) => read_spec(&source)?,
                None => ConnectionSpec {
                    kind: ConnectionKind::Http,
                    base_url: None,
                    headers: BTreeMap::new(),
                    secret_headers: BTreeMap::new(),
                    values: BTreeMap::new(),
                },
            };
            match kind {
                Some(Kind::Http) => spec.kind = ConnectionKind::Http,
                Some(Kind::Secret) => spec.kind = ConnectionKind::Secret,
                None => {}
            }
            spec.base_url = base_url.or(spec.base_url);
            spec.headers.extend(pairs("header", &headers)?);
            let secrets = match spec.kind {
                ConnectionKind::Http => (
                    &mut spec.secret_headers,
                    pairs("secret-header", &secret_headers)?,
                ),
                ConnectionKind::Secret => (&mut spec.values, pairs("value", &values)?),
            };
            secrets
                .0
                .extend(secrets.1.into_iter().map(|(k, v)| (k, Some(v))));
            secrets.0.extend(unset.into_iter().map(|k| (k, None)));
            let saved = engine
                .put_connection(&tenant, name_of(&name)?, spec)
                .await?;
            let verb = if saved.created { "created" } else { "changed" };
            let set: Vec<&str> = saved
                .connection
                .secrets
                .keys()
                .map(String::as_str)
                .collect();
            println!(
                "connection `{}` {verb}; secrets set: {}",
                saved.connection.name,
                if set.is_empty() {
                    "none".to_owned()
                } else {
                    set.join(", ")
                }
            );
            Ok(())
        }
        ConnectionVerb::List => {
            let connections = engine.connections(&tenant).await?;
            println!("{}", serde_json::to_string_pretty(&connections)?);
            Ok(())
        }
        ConnectionVerb::Show { name } => {
            let name = name_of(&name)?;
            match engine.connection(&tenant, &name).await? {
                Some(connection) => {
                    println!("{}", serde_json::to_string_pretty(&connection)?);
                    Ok(())
                }
                None => bail!("tenant {tenant} has no connection `{name}`"),
            }
        }
        ConnectionVerb::Delete { name } => {
            let name = name_of(&name)?;
            if engine.delete_connection(&tenant, &name).await? {
                println!("connection `{name}` deleted");
                Ok(())
            } else {
                bail!("tenant {tenant} has no connection `{name}`")
            }
        }
        ConnectionVerb::RotateKey => Ok(()),
    }
}
