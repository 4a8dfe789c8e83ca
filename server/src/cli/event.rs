//! `durable event --tenant T NAME`: publishing an event to a tenant from the command line. Its
//! runs waiting for it whose filters it passes take it, and the workflows it triggers start.

use anyhow::Context;
use clap::Args;
use durable::model::{EventId, Namespace, PublishedEvent, Scope};

use super::args::{ClusterArgs, operator_engine};

/// `durable event` options.
#[derive(Debug, Args)]
pub struct EventArgs {
    /// The tenant it is published to (`default` for a standalone server's own).
    #[arg(long)]
    tenant: String,
    /// What happened (`order.paid`).
    name: String,
    /// Its data, as JSON.
    #[arg(long, default_value = "null")]
    payload: String,
    /// What it is about: waits that name a key take only events with it.
    #[arg(long)]
    key: Option<String>,
    /// Its id: published again under it, nothing new happens.
    #[arg(long)]
    id: Option<String>,
    /// On a cluster, the events and wake-ups also go out on its Redis.
    #[command(flatten)]
    cluster: ClusterArgs,
}

/// Publishes the event and prints what it did, as JSON.
pub async fn run(database_url: &str, args: EventArgs) -> anyhow::Result<()> {
    let tenant = Namespace::parse(&args.tenant).context("invalid --tenant")?;
    let event = PublishedEvent {
        name: args.name,
        payload: serde_json::from_str(&args.payload).context("--payload is not valid JSON")?,
        key: args.key,
        id: args.id.map(|id| EventId::parse(&id)).transpose()?,
    };
    let engine = operator_engine(
        database_url,
        args.cluster.redis_if_set(),
        durable::EngineConfig::default(),
    )
    .await?;
    let outcome = engine.publish(&Scope::Only(tenant), event).await?;
    println!("{}", serde_json::to_string_pretty(&outcome)?);
    Ok(())
}
