//! The command line: `serve`, `control-plane`, `worker`, `migrate`, `user` (in [`crate::users`]),
//! `token` (in [`crate::tokens`]), `tenant plan`, `run`.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Args, Parser, Subcommand};
use durable::model::{InputLimits, Namespace, Plan};

use crate::public_url::PublicUrl;
use crate::{database, roles, secret, tokens, users};

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

/// Where the state lives.
#[derive(Debug, Args)]
pub struct DbArgs {
    /// The database: `sqlite://PATH` (created if missing; the default is
    /// sqlite://./data/durable.db) or `postgres://USER@HOST/DATABASE`.
    #[arg(long, env = "DATABASE_URL", global = true)]
    pub database_url: Option<String>,
}

impl DbArgs {
    /// The configured database, or the embedded default.
    pub fn url(&self) -> String {
        self.database_url
            .clone()
            .unwrap_or_else(|| "sqlite://./data/durable.db".into())
    }
}

/// Where the cluster's broker is.
#[derive(Debug, Args)]
pub struct ClusterArgs {
    /// The Redis every control plane and worker of the cluster shares.
    #[arg(long, env = "REDIS_URL")]
    pub redis_url: Option<String>,
    /// The wire prefix of every queue and key (all processes of a cluster must agree).
    #[arg(long, env = "DURABLE_PREFIX", default_value = "durable")]
    pub prefix: String,
}

impl ClusterArgs {
    /// The Redis settings, or an error naming what to set.
    fn redis(&self, role: &str) -> anyhow::Result<durable::transport::RedisConfig> {
        self.redis_if_set().ok_or_else(|| {
            anyhow::anyhow!(
                "`durable {role}` works through Redis: set REDIS_URL (for example redis://127.0.0.1:6379)"
            )
        })
    }

    /// The Redis settings, when a Redis is configured.
    pub fn redis_if_set(&self) -> Option<durable::transport::RedisConfig> {
        let url = self.redis_url.as_ref().filter(|u| !u.is_empty())?;
        Some(durable::transport::RedisConfig {
            prefix: self.prefix.clone(),
            ..durable::transport::RedisConfig::new(url.clone())
        })
    }
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
    /// Manage a tenant's schedules (workflows started on a cron expression or an interval).
    Schedule(crate::schedules::ScheduleArgs),
    /// Publish an event to a tenant: its runs waiting for it take it, and the workflows it
    /// triggers start.
    Event(crate::publish::EventArgs),
    /// Delete the finished history tenants' plans no longer keep (`retention_days`), as every
    /// control plane does once a minute; `--dry-run` only says what would go.
    Prune(crate::prune::PruneArgs),
}

/// `durable tenant …`
#[derive(Debug, Subcommand)]
pub enum TenantCommand {
    /// Show or set a tenant's plan, or the default plan.
    #[command(subcommand)]
    Plan(PlanCommand),
}

/// `durable tenant plan …`
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
        plan.validate()?;
        Ok(plan)
    }
}

/// `durable run …`
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Only act on this tenant's runs (`default` for those a standalone server stamps when
    /// nobody names a tenant); a run of another tenant is "not found".
    #[arg(long, global = true)]
    pub tenant: Option<String>,
    /// Act for the control plane started with this `--namespace`: only its runs, and notices on
    /// its own `<prefix>-<namespace>` queues (instead of `--tenant`).
    #[arg(long, global = true, env = "DURABLE_NAMESPACE")]
    pub namespace: Option<String>,
    /// On a cluster, events and cancel notices also go out on its Redis.
    #[command(flatten)]
    pub cluster: ClusterArgs,
    #[command(subcommand)]
    pub verb: RunVerb,
}

/// A control verb.
#[derive(Debug, Subcommand)]
pub enum RunVerb {
    /// Send a signal (buffered until the run waits for it).
    Signal {
        /// The run.
        id: String,
        /// The signal name.
        #[arg(long)]
        name: String,
        /// The payload, as JSON.
        #[arg(long, default_value = "null")]
        payload: String,
        /// Signal-with-start: start the run (with this id) as this workflow first, if there
        /// is no run with the id.
        #[arg(long)]
        start: Option<String>,
        /// The input of the run `--start` starts, as JSON.
        #[arg(long, default_value = "null", requires = "start")]
        input: String,
    },
    /// Ask a run's workflow query `name`: its answer, from the run's state (nothing changes).
    Query {
        /// The run.
        id: String,
        /// The query name.
        name: String,
        /// The query's argument, as JSON.
        #[arg(long, default_value = "null")]
        arg: String,
    },
    /// Send a run's workflow update `name`: its handler's reply, or why it refused (then
    /// nothing changes).
    Update {
        /// The run.
        id: String,
        /// The update name.
        name: String,
        /// The update's argument, as JSON.
        #[arg(long, default_value = "null")]
        arg: String,
        /// The update's id: repeated with the same key, the first reply comes back and the run
        /// receives the update once.
        #[arg(long)]
        key: Option<String>,
    },
    /// Print a run's whole history (the run and every checkpoint) as JSON, in the shape of
    /// `GET /api/v1/runs/{id}/history` (`durable.run-history/1`).
    History {
        /// The run.
        id: String,
    },
    /// Cancel a run.
    Cancel {
        /// The run.
        id: String,
    },
    /// Re-drive a failed or dead run from its last good checkpoint.
    Retry {
        /// The run.
        id: String,
    },
    /// Start a new run of the same workflow with edited input, linked by `retry_of`.
    RetryWithInput {
        /// The original run.
        id: String,
        /// The new input, as JSON.
        #[arg(long)]
        input: String,
    },
}

/// `durable serve` options.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, env = "DURABLE_BIND", default_value = "127.0.0.1:3000")]
    pub bind: SocketAddr,
    /// The namespace this engine polls; unset drives every namespace (the standalone default,
    /// since one process hosts every tenant of its dashboard).
    #[arg(long, env = "DURABLE_NAMESPACE")]
    pub namespace: Option<String>,
    /// How long a run stays leased to this process without renewal (seconds). A crashed
    /// process's runs are resumed after this long.
    #[arg(long, env = "DURABLE_LEASE_SECS", default_value_t = 30)]
    pub lease_secs: u64,
    /// How many workflow turns may execute (and wait for their write) at once. More overlaps
    /// more store round trips; each holds its run's history in memory.
    #[arg(long, env = "DURABLE_MAX_TURNS", default_value_t = 512, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub max_turns: u32,
    /// Create demo users (their passwords printed once) and demo runs on first start: for
    /// trying durable out (`make run`), never for a deployment, which adds its users with
    /// `durable user add`.
    #[arg(long, env = "DURABLE_DEMO")]
    pub demo: bool,
    /// Where browsers reach the dashboard (`https://durable.example.com`), when it sits
    /// behind a proxy: cross-site requests are judged against it, and over HTTPS the session
    /// cookie is `Secure` and `__Host-` prefixed.
    #[arg(long, env = "DURABLE_PUBLIC_URL")]
    pub public_url: Option<PublicUrl>,
    #[command(flatten)]
    pub limits: LimitArgs,
}

/// What one request may carry: every start, signal, retry and list filter is checked against
/// these, on the API, the dashboard and the wire alike (see `durable::model::InputLimits`).
#[derive(Debug, Args)]
pub struct LimitArgs {
    /// The largest input, signal payload or retry input, in bytes of JSON.
    #[arg(long, env = "DURABLE_MAX_PAYLOAD_BYTES", default_value_t = InputLimits::default().max_payload_bytes as u64, value_parser = clap::value_parser!(u64).range(1..=(256 << 20)))]
    pub max_payload_bytes: u64,
    /// The most tags one run carries.
    #[arg(long, env = "DURABLE_MAX_TAGS", default_value_t = InputLimits::default().max_tags as u64, value_parser = clap::value_parser!(u64).range(0..=10_000))]
    pub max_tags: u64,
    /// The longest tag, in characters.
    #[arg(long, env = "DURABLE_MAX_TAG_CHARS", default_value_t = InputLimits::default().max_tag_chars as u64, value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub max_tag_chars: u64,
    /// The most search attributes one run carries.
    #[arg(long, env = "DURABLE_MAX_ATTRIBUTES", default_value_t = InputLimits::default().max_attributes as u64, value_parser = clap::value_parser!(u64).range(0..=1000))]
    pub max_attributes: u64,
    /// The longest search-attribute string value, in characters.
    #[arg(long, env = "DURABLE_MAX_ATTRIBUTE_VALUE_CHARS", default_value_t = InputLimits::default().max_attribute_value_chars as u64, value_parser = clap::value_parser!(u64).range(1..=65_536))]
    pub max_attribute_value_chars: u64,
    /// The longest workflow or signal name, in characters.
    #[arg(long, env = "DURABLE_MAX_NAME_CHARS", default_value_t = InputLimits::default().max_name_chars as u64, value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub max_name_chars: u64,
    /// The most schedules one tenant keeps.
    #[arg(long, env = "DURABLE_MAX_SCHEDULES", default_value_t = InputLimits::default().max_schedules as u64, value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    pub max_schedules: u64,
}

impl LimitArgs {
    /// The limits these flags set (each within its range already).
    pub fn limits(&self) -> InputLimits {
        let size = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        InputLimits {
            max_payload_bytes: size(self.max_payload_bytes),
            max_tags: size(self.max_tags),
            max_tag_chars: size(self.max_tag_chars),
            max_attributes: size(self.max_attributes),
            max_attribute_value_chars: size(self.max_attribute_value_chars),
            max_name_chars: size(self.max_name_chars),
            max_schedules: size(self.max_schedules),
        }
    }
}

impl ServeArgs {
    /// The role's settings.
    fn config(
        self,
        database_url: String,
        cluster: roles::Cluster,
    ) -> anyhow::Result<roles::ServeConfig> {
        let namespace = self
            .namespace
            .as_deref()
            .map(Namespace::parse)
            .transpose()
            .context("invalid --namespace")?;
        if std::env::var_os("DURABLE_TENANT").is_some() {
            bail!(
                "DURABLE_TENANT names a worker's partition; a control plane polls a namespace: \
                 set DURABLE_NAMESPACE instead (or nothing, for the operator)"
            );
        }
        Ok(roles::ServeConfig {
            database_url,
            bind: self.bind,
            namespace,
            lease: Duration::from_secs(self.lease_secs.max(1)),
            max_turns: self.max_turns as usize,
            demo: self.demo,
            public_url: self.public_url,
            limits: self.limits.limits(),
            cluster,
        })
    }

    /// The options `durable` without a subcommand runs with: flags' defaults and environment.
    fn from_env() -> Self {
        #[derive(Parser)]
        struct Only {
            #[command(flatten)]
            serve: ServeArgs,
        }
        Only::parse_from(["durable"]).serve
    }
}

/// `durable control-plane` options.
#[derive(Debug, Args)]
pub struct ControlPlaneArgs {
    #[command(flatten)]
    pub serve: ServeArgs,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

/// `durable worker` options.
#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// The tenant whose steps this worker runs: it becomes the worker's partition on the
    /// cluster's shared prefix, where a control plane without a namespace sends them. Without
    /// it (and without `--namespace`) the worker serves the default partition, the bare
    /// `durable-tasks-<step>` queues, as an SDK worker with no partition does.
    #[arg(long, env = "DURABLE_TENANT")]
    pub tenant: Option<String>,
    /// Instead of `--tenant`: serve the control plane started with this `--namespace`, whose
    /// queues and keys all live under `<prefix>-<namespace>`.
    #[arg(long, env = "DURABLE_NAMESPACE")]
    pub namespace: Option<String>,
    /// Steps run at once.
    #[arg(long, env = "DURABLE_CONCURRENCY", default_value_t = 64)]
    pub concurrency: usize,
    /// Serve this worker's `/metrics` on this address (`0.0.0.0:9464`, say), for the bearer
    /// secret in `DURABLE_METRICS_TOKEN`.
    #[arg(long, env = "DURABLE_METRICS_BIND", requires = "metrics_token")]
    pub metrics_bind: Option<SocketAddr>,
    /// The secret (32 characters at least) a scraper sends as `Authorization: Bearer` to this
    /// worker's `/metrics`. Not an API token: a tenant's worker may run on the tenant's hosts,
    /// and a scrape secret there grants reading this worker's metrics, nothing else.
    #[arg(long, env = "DURABLE_METRICS_TOKEN", hide_env_values = true)]
    pub metrics_token: Option<String>,
    #[command(flatten)]
    pub cluster: ClusterArgs,
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
            let metrics = match (args.metrics_bind, args.metrics_token) {
                (Some(bind), Some(token)) => {
                    if token.trim().chars().count() < 32 {
                        bail!(
                            "DURABLE_METRICS_TOKEN is too short to be a secret: give it 32 \
                             characters at least (`openssl rand -hex 32` prints one)"
                        );
                    }
                    Some((bind, token.trim().to_owned()))
                }
                _ => None,
            };
            roles::worker(roles::WorkerRole {
                tenant,
                concurrency: args.concurrency.max(1),
                metrics,
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
        Command::Schedule(args) => crate::schedules::run(&cli.db.url(), args).await,
        Command::Event(args) => crate::publish::run(&cli.db.url(), args).await,
        Command::Prune(args) => crate::prune::run(&cli.db.url(), args).await,
        Command::Token(command) => tokens::run(&cli.db.url(), command).await,
        Command::Tenant(TenantCommand::Plan(command)) => plan_command(&cli.db.url(), command).await,
    }
}

/// `durable tenant plan show|set`, on the database directly (a running server sees a change
/// within a second).
async fn plan_command(database_url: &str, command: PlanCommand) -> anyhow::Result<()> {
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

/// An engine for a command an operator runs once against `database_url` (not started: what it
/// changes, a running server picks up at its next poll), on the cluster's Redis when `redis` is
/// set, so events and cancel notices reach live dashboards and in-flight steps at once, and
/// workflows only SDK workers serve are known.
pub async fn operator_engine(
    database_url: &str,
    redis: Option<durable::transport::RedisConfig>,
    limits: InputLimits,
) -> anyhow::Result<durable::Engine> {
    use std::sync::Arc;

    let db = database::open_store(database_url).await?;
    let transport: Arc<dyn durable::transport::Transport> = match redis {
        Some(redis) => Arc::new(durable::transport::RedisTransport::connect(redis).await?),
        None => Arc::new(durable::transport::MemoryTransport::new()),
    };
    Ok(durable::Engine::new(
        db.store,
        transport,
        Arc::new(crate::demo::registry()),
        durable::EngineConfig {
            limits,
            ..durable::EngineConfig::default()
        },
    ))
}

async fn run_verb(database_url: &str, args: RunArgs) -> anyhow::Result<()> {
    use durable::model::{RunId, Scope, UpdateId};
    use durable::store::SignalSent;
    use durable::{Control, UpdateOutcome};

    let mut redis = args.cluster.redis_if_set();
    let scope = match (&args.tenant, &args.namespace) {
        (Some(_), Some(_)) => bail!(
            "give either --tenant NAME (one tenant's runs) or --namespace NAME (a namespaced \
             control plane's runs), not both"
        ),
        // Any namespace, `default` included: this only narrows what the operator acts on.
        (Some(t), None) => Scope::Only(Namespace::parse(t).context("invalid --tenant")?),
        (None, Some(ns)) => {
            let ns = Namespace::tenant(ns).context("invalid --namespace")?;
            if let Some(redis) = &mut redis {
                redis.namespace = Some(ns.clone());
            }
            Scope::Only(ns)
        }
        (None, None) => Scope::All,
    };
    let json = |what: &str, raw: &str| -> anyhow::Result<serde_json::Value> {
        serde_json::from_str(raw).with_context(|| format!("--{what} is not valid JSON"))
    };
    let id_of = |raw: &str| RunId::parse(raw).map_err(anyhow::Error::from);
    // Changes are made in the database; a running server picks them up on its next poll. On a
    // cluster (REDIS_URL set) the events and cancel notices go out on Redis too, so live
    // dashboards and in-flight steps hear them at once.
    let engine = operator_engine(database_url, redis, InputLimits::default()).await?;
    let (verb, outcome) = match args.verb {
        RunVerb::Signal {
            id,
            name,
            payload,
            start: Some(workflow),
            input,
        } => {
            let Some(tenant) = scope.namespace().cloned() else {
                bail!("signal-with-start starts the run in a tenant: give --tenant NAME");
            };
            let start = durable::StartRun {
                workflow,
                input: json("input", &input)?,
                namespace: Some(tenant),
                id: Some(id_of(&id)?),
                ..durable::StartRun::default()
            };
            let payload = json("payload", &payload)?;
            let (run, started) = engine
                .signal_with_start(&scope, start, &name, payload)
                .await?;
            let how = if started {
                "started, then sent"
            } else {
                "sent"
            };
            println!("{} {}: signal `{name}` {how}", run.id, run.status);
            return Ok(());
        }
        RunVerb::Signal {
            id, name, payload, ..
        } => {
            let id = id_of(&id)?;
            let payload = json("payload", &payload)?;
            return match engine.signal(&scope, &id, &name, payload).await? {
                SignalSent::Delivered(run) => {
                    println!("signal `{name}` sent to {} ({})", run.id, run.status);
                    Ok(())
                }
                SignalSent::NotFound => bail!("no run {id} is visible here"),
                SignalSent::RunFinished(run) => bail!(
                    "run {} already ended ({}); it takes no signals",
                    run.id,
                    run.status
                ),
            };
        }
        RunVerb::Query { id, name, arg } => {
            let id = id_of(&id)?;
            let answer = engine.query(&scope, &id, &name, json("arg", &arg)?).await?;
            let Some(answer) = answer else {
                bail!("no run {id} is visible here");
            };
            println!("{}", serde_json::to_string_pretty(&answer)?);
            return Ok(());
        }
        RunVerb::Update { id, name, arg, key } => {
            let id = id_of(&id)?;
            let key = key.map(|k| UpdateId::parse(&k)).transpose()?;
            return match engine
                .update(&scope, &id, &name, json("arg", &arg)?, key)
                .await?
            {
                UpdateOutcome::Replied(reply) => {
                    println!("{}", serde_json::to_string_pretty(&reply)?);
                    Ok(())
                }
                UpdateOutcome::NotFound => bail!("no run {id} is visible here"),
                UpdateOutcome::RunFinished(run) => bail!(
                    "run {} already ended ({}); it takes no updates",
                    run.id,
                    run.status
                ),
            };
        }
        RunVerb::History { id } => {
            let id = id_of(&id)?;
            let store = engine.store();
            let Some(run) = store.get_run(&scope, &id).await? else {
                bail!("no run {id} is visible here");
            };
            let checkpoints = store.checkpoints(&scope, &id).await?;
            let detail = durable::model::RunDetail { run, checkpoints };
            let history = durable::model::RunHistory::new(detail, crate::secret::now_ms());
            println!("{}", serde_json::to_string_pretty(&history)?);
            return Ok(());
        }
        RunVerb::Cancel { id } => ("cancel", engine.cancel(&scope, &id_of(&id)?).await?),
        RunVerb::Retry { id } => ("retry", engine.retry(&scope, &id_of(&id)?).await?),
        RunVerb::RetryWithInput { id, input } => {
            let input = json("input", &input)?;
            (
                "retry",
                engine.retry_with_input(&scope, &id_of(&id)?, input).await?,
            )
        }
    };
    match outcome {
        Control::Done(run) => {
            println!("{} {}", run.id, run.status);
            Ok(())
        }
        Control::NotFound => bail!("no run with that id is visible here"),
        Control::WrongStatus(run) => bail!("cannot {verb} run {}: it is {}", run.id, run.status),
    }
}
