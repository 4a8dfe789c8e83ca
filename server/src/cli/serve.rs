//! `durable serve`, `durable control-plane` and `durable worker`: the long-running roles' options.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Args, Parser};
use durable::model::Namespace;

use super::args::{ClusterArgs, LimitArgs};
use crate::public_url::PublicUrl;
use crate::roles;

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

impl ServeArgs {
    /// The role's settings.
    pub(super) fn config(
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
            master_keys: durable::secrets::MasterKeys::from_env()?,
            egress: durable::builtin::http::EgressPolicy::from_env()?,
            cluster,
        })
    }

    /// The options `durable` without a subcommand runs with: flags' defaults and environment.
    pub(super) fn from_env() -> Self {
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
    /// Serve this pool of the tenant (`durable pool put --tenant T NAME`) instead of its own
    /// partition: the queues of partition `<tenant>.<pool>`, where the tenant's routing sends
    /// the steps it gives the pool. Without `--tenant`: an operator's shared pool (`durable pool
    /// put --shared NAME`), serving every tenant it is granted to, fairly by their weights.
    #[arg(long, env = "DURABLE_POOL", conflicts_with = "namespace")]
    pub pool: Option<String>,
    /// The tenant's wire token (`durable token issue --tenant T --wire`): with it the worker
    /// reads the tenant's connections from the control plane (`ctx.connection`, sealed to a
    /// one-time key of each request) and serves the built-in `durable.http` step. Keep it as
    /// secret as the connections it opens.
    #[arg(long, env = "DURABLE_WIRE_TOKEN", hide_env_values = true)]
    pub wire_token: Option<String>,
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
