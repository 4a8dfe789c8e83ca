//! Wiring a process for its role:
//!
//! - standalone (`serve`): store, in-process transport, engine, embedded worker, dashboard and
//!   API in one process;
//! - control plane (`control-plane`): the same without a worker, on the Redis transport, so
//!   store-less workers anywhere execute the steps;
//! - tenant worker (`worker --tenant NAME`, or `worker --namespace NAME` for a namespaced
//!   control plane): no store, only the Redis transport and the step handlers, consuming its
//!   tenant's steps.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use app::ssr::AppState;
use durable::builtin::http::{EgressPolicy, HttpStepConfig};
use durable::gateway::{RemoteConnections, RunRequestResponder};
use durable::model::InputLimits;
use durable::model::{Namespace, Scope};
use durable::runtime::{SystemClock, Worker, WorkerConfig};
use durable::secrets::MasterKeys;
use durable::transport::{MemoryTransport, Partitions, RedisConfig, RedisTransport, Transport};
use durable::{Engine, EngineConfig};
use leptos::config::get_configuration;
use tokio::sync::watch;

use crate::database::{Database, open_store};
use crate::metrics::Metrics;
use crate::public_url::PublicUrl;
use crate::routes;
use crate::sessions::session_layer;
use crate::state::{ServerState, Shutdown};
use crate::tenant_view::TenantViews;
use crate::{demo, secret};

/// How long shutdown may take before in-flight work is abandoned to lease expiry.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(20);

/// How a control plane reaches its workers.
pub enum Cluster {
    /// One process: in-process transport and an embedded worker.
    Standalone,
    /// Workers elsewhere, through Redis; no embedded worker.
    Redis(RedisConfig),
}

/// `durable serve` / `durable control-plane` settings.
pub struct ServeConfig {
    pub database_url: String,
    pub bind: SocketAddr,
    pub namespace: Option<Namespace>,
    pub lease: Duration,
    pub max_turns: usize,
    pub demo: bool,
    pub public_url: Option<PublicUrl>,
    pub limits: InputLimits,
    /// What seals tenants' connection secrets (`DURABLE_MASTER_KEY`); without it a server
    /// that keeps connections refuses to start.
    pub master_keys: Option<MasterKeys>,
    /// Which non-public addresses the `durable.http` step may reach
    /// (`DURABLE_CONNECTION_ALLOW`).
    pub egress: EgressPolicy,
    pub cluster: Cluster,
}

/// `durable worker` settings.
pub struct WorkerRole {
    /// What it serves: its tenant's own partition or one of its pools (under a namespaced
    /// control plane, the tenant is its namespace too), or an operator's shared pool.
    pub partitions: Partitions,
    /// Its tenant's wire token: the worker then reads the tenant's connections from the
    /// control plane and serves `durable.http`.
    pub wire_token: Option<String>,
    /// Steps at once.
    pub concurrency: usize,
    /// The cluster's Redis; with a namespace, that of the namespaced control plane it serves.
    pub redis: RedisConfig,
    /// Where to serve `/metrics`, and the bearer secret it answers.
    pub metrics: Option<(SocketAddr, String)>,
}

/// Runs a store-less tenant worker until SIGINT/SIGTERM: it consumes the tenant's step queues
/// (`<name>@<tenant>` on the shared prefix, or `<name>` under a namespaced control plane's
/// `<prefix>-<tenant>`) and announces itself so dashboards list it.
pub async fn worker(cfg: WorkerRole) -> anyhow::Result<()> {
    if let Some((bind, token)) = cfg.metrics {
        let recorder = crate::metrics::install()?;
        let listener = tokio::net::TcpListener::bind(bind).await.with_context(|| {
            format!("cannot serve /metrics on {bind}; set DURABLE_METRICS_BIND to a free address")
        })?;
        tracing::info!("serving /metrics on http://{bind}");
        tokio::spawn(async move {
            let router = crate::metrics::worker_router(recorder, token);
            if let Err(e) = axum::serve(listener, router).await {
                tracing::error!(error = %e, "the /metrics listener stopped");
            }
        });
    }
    let redis = RedisTransport::connect(cfg.redis)
        .await
        .context("connecting to Redis")?;
    let transport: Arc<dyn Transport> = Arc::new(redis.clone());
    let mut registry = demo::registry();
    let connections = match cfg.wire_token {
        None => None,
        Some(token) => {
            let connections = RemoteConnections::connect(transport.clone(), token)
                .await
                .context("setting up the worker's connections")?;
            let http = HttpStepConfig {
                egress: EgressPolicy::from_env()?,
                ..HttpStepConfig::default()
            };
            durable::builtin::http::register(&mut registry, http)
                .context("building the HTTP client of the durable.http step")?;
            tracing::info!(tenant = %connections.tenant(), "reading connections from the control plane");
            Some(connections as Arc<dyn durable::runtime::ConnectionSource>)
        }
    };
    let registry = Arc::new(registry);
    let worker = Worker::start(
        registry.clone(),
        transport.clone(),
        Arc::new(SystemClock),
        WorkerConfig {
            partitions: cfg.partitions.clone(),
            concurrency: cfg.concurrency,
            connections,
        },
    )
    .await
    .context("starting the worker")?;
    tracing::info!(
        serves = ?cfg.partitions,
        prefix = redis.prefix(),
        instance = redis.instance_id(),
        steps = ?registry.step_names(),
        "worker consuming its steps"
    );
    shutdown_signal().await;
    tracing::info!("shutting down: finishing in-flight steps");
    if tokio::time::timeout(SHUTDOWN_GRACE, worker.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("steps still running were abandoned; the control plane sends them again");
    }
    Ok(())
}

pub use durable::url::redact;

/// Runs the standalone server until SIGINT/SIGTERM, then drains in-flight work.
pub async fn serve(cfg: ServeConfig) -> anyhow::Result<()> {
    let recorder = crate::metrics::install()?;
    let Database { store, accounts } = open_store(&cfg.database_url).await?;
    let fallback = if cfg.demo {
        secret::Fallback::Generate
    } else {
        secret::Fallback::None
    };
    let signer = secret::token_signer(&*accounts, fallback).await?;
    let mut registry = demo::registry();
    if let Cluster::Standalone = &cfg.cluster {
        // The embedded worker runs the engine's own steps, with the tenants' connections.
        let http = HttpStepConfig {
            egress: cfg.egress.clone(),
            ..HttpStepConfig::default()
        };
        durable::builtin::http::register(&mut registry, http)
            .context("building the HTTP client of the durable.http step")?;
    }
    let registry = Arc::new(registry);
    let transport: Arc<dyn Transport> = match &cfg.cluster {
        Cluster::Standalone => Arc::new(MemoryTransport::new()),
        // A namespaced control plane's queues and keys are its namespace's own
        // (`<prefix>-<namespace>`, spec §6), served by workers started with that namespace.
        Cluster::Redis(redis) => Arc::new(
            RedisTransport::connect(RedisConfig {
                namespace: cfg.namespace.clone(),
                ..redis.clone()
            })
            .await
            .context("connecting to Redis")?,
        ),
    };
    let engine = Engine::new(
        store.clone(),
        transport.clone(),
        registry.clone(),
        EngineConfig {
            namespace: cfg.namespace.clone(),
            lease: cfg.lease,
            max_concurrent_turns: cfg.max_turns,
            limits: cfg.limits.clone(),
            master_keys: cfg.master_keys.clone(),
            ..EngineConfig::default()
        },
    );
    engine
        .check_master_keys()
        .await
        .context("checking the master key against the stored connections")?;
    engine.start().await.context("starting the engine")?;
    if let Cluster::Redis(_) = &cfg.cluster {
        // The door for store-less tenant pods: run requests in, replies out, tenant from the
        // signed token only.
        let responder = RunRequestResponder::new(engine.clone(), signer.clone());
        tokio::spawn(async move {
            if let Err(e) = responder.serve().await {
                tracing::error!(error = %e, "the run-request responder stopped");
            }
        });
    }
    // Standalone, one process is the whole cluster: its worker serves the partitions it
    // drives. A control plane leaves steps to the tenants' workers.
    let worker = match &cfg.cluster {
        Cluster::Redis(_) => None,
        Cluster::Standalone => {
            let partitions = match &cfg.namespace {
                None => Partitions::All,
                Some(ns) => Partitions::Only(vec![ns.clone().into()]),
            };
            let worker = Worker::start(
                registry,
                transport.clone(),
                Arc::new(SystemClock),
                WorkerConfig {
                    partitions,
                    concurrency: 256,
                    connections: Some(engine.connection_source()),
                },
            )
            .await
            .context("starting the embedded worker")?;
            Some(worker)
        }
    };
    if cfg.demo {
        demo::seed(&engine, &*accounts)
            .await
            .context("creating demo data")?;
    } else if accounts.count_users().await? == 0 {
        println!(
            "No dashboard users yet: add an operator with `durable user add --role operator --email you@example.com` (it prints the password), or run with --demo to try durable out with demo users."
        );
    }

    let https = cfg.public_url.as_ref().is_some_and(PublicUrl::is_https);
    let sessions = session_layer(&cfg.database_url, https).await?;
    let mut leptos_options = get_configuration(None)
        .context("reading the Leptos configuration")?
        .leptos_options;
    leptos_options.site_addr = cfg.bind;
    let (stop_tx, stop_rx) = watch::channel(false);
    let state = ServerState {
        app: AppState::new(leptos_options, engine.clone(), accounts),
        tenant_views: TenantViews::new(engine.clone()),
        signer,
        shutdown: Shutdown(stop_rx),
        live: crate::live::LiveHub::new(engine.transport().clone()),
        public_url: cfg.public_url.clone(),
        metrics: Metrics::new(
            recorder,
            engine.store().clone(),
            match &cfg.namespace {
                Some(ns) => Scope::Only(ns.clone()),
                None => Scope::All,
            },
        ),
    };
    let router = routes::router(state, sessions);
    let listener = tokio::net::TcpListener::bind(cfg.bind)
        .await
        .with_context(|| format!("cannot listen on {}; is another server running? set DURABLE_BIND to another address", cfg.bind))?;
    tracing::info!(namespace = %cfg.namespace.as_ref().map(|n| n.to_string()).unwrap_or_else(|| "every namespace".into()), "serving on http://{}", cfg.bind);
    axum::serve(
        listener,
        router.into_make_service_with_connect_info::<std::net::SocketAddr>(),
    )
    .with_graceful_shutdown(async move {
        shutdown_signal().await;
        tracing::info!("shutting down: finishing in-flight work");
        let _ = stop_tx.send(true);
    })
    .await
    .context("the HTTP server failed")?;
    let drain = async {
        if let Some(worker) = worker {
            worker.shutdown().await;
        }
        engine.shutdown().await;
    };
    if tokio::time::timeout(SHUTDOWN_GRACE, drain).await.is_err() {
        tracing::warn!(
            "in-flight work did not finish in time; its leases expire and another start resumes it"
        );
    }
    tracing::info!("stopped");
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::error!(error = %e, "cannot listen for SIGINT");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = term => {}
    }
}
