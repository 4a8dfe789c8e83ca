//! `durable run …`: an operator's verbs on runs (signal, query, update, history, cancel, retry),
//! on the database directly, and on the cluster's Redis when it has one.

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use durable::model::Namespace;

use super::args::{ClusterArgs, operator_engine};

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

pub(super) async fn run_verb(database_url: &str, args: RunArgs) -> anyhow::Result<()> {
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
    let engine = operator_engine(database_url, redis, durable::EngineConfig::default()).await?;
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
