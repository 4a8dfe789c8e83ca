//! The command line, one file per command: `serve`, `control-plane` and `worker` ([`serve`]),
//! `migrate`, `user` ([`users`]), `token` ([`tokens`]), `run` ([`runs`]), `tenant plan`
//! ([`plans`]), `pool` ([`pools`]), `route` ([`routing`]), `schedule` ([`schedules`]),
//! `event` ([`event`]) and `prune` ([`prune`]); the options several share are [`args`].

mod args;
mod connections;
mod event;
mod plans;
mod pools;
mod prune;
mod routing;
mod runs;
mod schedules;
mod serve;
mod tokens;
mod users;

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};
use durable::model::{Namespace, Partition, PoolName};
use durable::transport::Partitions;

pub use self::args::DbArgs;
use self::plans::{TenantCommand, plan_command};
use self::runs::{RunArgs, run_verb};
use self::serve::{ControlPlaneArgs, ServeArgs, WorkerArgs};
use crate::{database, roles};

/// A multi-tenant durable workflow engine with a live dashboard.
#[derive(Debug, Parser)]
#[command(name = "durable", version, about)]
pub struct Cli {
    #[command(flatten)]
    pub db: DbArgs,
    /// What to do; `serve` when omitted.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// What to do.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the standalone server: engine, embedded worker, dashboard and API in one process.
    Serve(ServeArgs),
    /// Run a control plane of a cluster: it owns the database and drives runs (every
    /// namespace when none is set: the operator), serves the dashboard and API, and sends steps
    /// to workers through Redis.
    ControlPlane(ControlPlaneArgs),
    /// Run a store-less worker for one tenant: it executes the tenant's steps it receives
    /// through Redis, and nothing else.
    Worker(WorkerArgs),
    /// Apply database migrations and exit.
    Migrate,
    /// Manage dashboard users.
    #[command(subcommand)]
    User(users::UserCommand),
    /// Manage API tokens.
    #[command(subcommand)]
    Token(tokens::TokenCommand),
    /// Act on runs (as an operator; `--tenant` confines the command to one tenant's runs).
    Run(RunArgs),
    /// Manage tenants' plans (ceilings and fair-share weights).
    #[command(subcommand)]
    Tenant(TenantCommand),
    /// Manage a tenant's worker pools (the partitions its steps can be routed to).
    Pool(pools::PoolArgs),
    /// Manage a tenant's routing rules (which pool each step goes to).
    Route(routing::RouteArgs),
    /// Manage a tenant's connections (credentials its steps use, secrets sealed), and rotate
    /// the master key that wraps them.
    Connection(connections::ConnectionArgs),
    /// Manage a tenant's schedules (workflows started on a cron expression or an interval).
    Schedule(schedules::ScheduleArgs),
    /// Publish an event to a tenant: its runs waiting for it take it, and the workflows it
    /// triggers start.
    Event(event::EventArgs),
    /// Delete the finished history tenants' plans no longer keep (`retention_days`), as every
    /// control plane does once a minute; `--dry-run` only says what would go.
    Prune(prune::PruneArgs),
}

/// Runs the parsed command.
pub async fn run(cli: Cli) -> anyhow::Result<()> {
    let command = cli
        .command
        .unwrap_or_else(|| Command::Serve(ServeArgs::from_env()));
    match command {
        Command::Serve(args) => {
            if std::env::var_os("REDIS_URL").is_some() {
                bail!(
                    "`durable serve` is one process with an in-process transport; for a cluster \
                     on Redis run `durable control-plane` and `durable worker --tenant NAME`, or \
                     unset REDIS_URL"
                );
            }
            roles::serve(args.config(cli.db.url(), roles::Cluster::Standalone)?).await
        }
        Command::ControlPlane(args) => {
            let redis = args.cluster.redis("control-plane")?;
            roles::serve(
                args.serve
                    .config(cli.db.url(), roles::Cluster::Redis(redis))?,
            )
            .await
        }
        Command::Worker(args) => {
            if cli.db.database_url.is_some() {
                bail!(
                    "a tenant worker is store-less and talks to the control plane only through \
                     Redis: unset DATABASE_URL"
                );
            }
            let mut namespaced = None;
            if let (None, None, Some(pool)) = (&args.tenant, &args.namespace, &args.pool) {
                // No tenant: an operator's shared pool, serving every tenant granted it.
                let pool = PoolName::parse(pool).context("invalid --pool")?;
                if args.wire_token.is_some() {
                    bail!(
                        "a shared pool's worker serves several tenants and reads no tenant's \
                         connections: unset DURABLE_WIRE_TOKEN, and route steps that read \
                         connections to a pool of their tenant (durable worker --tenant T --pool P)"
                    );
                }
                return roles::worker(roles::WorkerRole {
                    partitions: Partitions::Shared(pool),
                    wire_token: None,
                    concurrency: args.concurrency.max(1),
                    metrics: metrics(args.metrics_bind, args.metrics_token)?,
                    redis: args.cluster.redis("worker")?,
                })
                .await;
            }
            let tenant = match (args.tenant, args.namespace) {
                (Some(_), Some(_)) => bail!(
                    "a worker serves either a tenant's partition or a namespace, not both: keep \
                     --tenant NAME (DURABLE_TENANT) for a control plane without a namespace, or \
                     --namespace NAME (DURABLE_NAMESPACE) for one started with that namespace"
                ),
                (Some(tenant), None) => Namespace::tenant(&tenant).context("invalid --tenant")?,
                (None, Some(namespace)) => {
                    let namespace = Namespace::tenant(&namespace).context("invalid --namespace")?;
                    namespaced = Some(namespace.clone());
                    namespace
                }
                (None, None) => Namespace::default_ns(),
            };
            if let Some(token) = &args.wire_token {
                let of = durable::gateway::named_tenant(token)
                    .context("invalid DURABLE_WIRE_TOKEN (--wire-token)")?;
                if of != tenant {
                    bail!(
                        "the wire token is tenant `{of}`'s, and this worker serves tenant \
                         `{tenant}`: give it `{tenant}`'s (durable token issue --tenant {tenant} \
                         --wire)"
                    );
                }
            }
            let partition = match args.pool {
                Some(pool) => {
                    Partition::of_pool(tenant, PoolName::parse(&pool).context("invalid --pool")?)
                }
                None => Partition::of_tenant(tenant),
            };
            roles::worker(roles::WorkerRole {
                partitions: Partitions::Only(vec![partition]),
                wire_token: args.wire_token,
                concurrency: args.concurrency.max(1),
                metrics: metrics(args.metrics_bind, args.metrics_token)?,
                redis: durable::transport::RedisConfig {
                    namespace: namespaced,
                    ..args.cluster.redis("worker")?
                },
            })
            .await
        }
        Command::Migrate => {
            database::open_store(&cli.db.url()).await?;
            println!("migrations applied to {}", roles::redact(&cli.db.url()));
            Ok(())
        }
        Command::User(command) => users::run(&cli.db.url(), command).await,
        Command::Run(args) => run_verb(&cli.db.url(), args).await,
        Command::Schedule(args) => schedules::run(&cli.db.url(), args).await,
        Command::Pool(args) => pools::run(&cli.db.url(), args).await,
        Command::Route(args) => routing::run(&cli.db.url(), args).await,
        Command::Connection(args) => connections::run(&cli.db.url(), args).await,
        Command::Event(args) => event::run(&cli.db.url(), args).await,
        Command::Prune(args) => prune::run(&cli.db.url(), args).await,
        Command::Token(command) => tokens::run(&cli.db.url(), command).await,
        Command::Tenant(TenantCommand::Plan(command)) => plan_command(&cli.db.url(), command).await,
    }
}

/// Where a worker serves `/metrics`, and the bearer secret it answers, when both are given.
fn metrics(
    bind: Option<std::net::SocketAddr>,
    token: Option<String>,
) -> anyhow::Result<Option<(std::net::SocketAddr, String)>> {
    match (bind, token) {
        (Some(bind), Some(token)) => {
            if token.trim().chars().count() < 32 {
                bail!(
                    "DURABLE_METRICS_TOKEN is too short to be a secret: give it 32 characters at \
                     least (`openssl rand -hex 32` prints one)"
                );
            }
            Ok(Some((bind, token.trim().to_owned())))
        }
        _ => Ok(None),
    }
}
