//! `durable schedule …`: a tenant's schedules, on the database directly; running control
//! planes fire a new or changed schedule at its next look (within a second).

use anyhow::Context;
use clap::{Args, Subcommand};
use durable::Engine;
use durable::model::{Namespace, Schedule, ScheduleFields, ScheduleId, SchedulePatch, Scope};
use durable::schedules::next_fires;

use super::args::{ClusterArgs, LimitArgs, operator_engine};

/// `durable schedule …`
#[derive(Debug, Args)]
pub struct ScheduleArgs {
    /// The tenant whose schedules these are (`default` for a standalone server's own).
    #[arg(long, global = true)]
    tenant: Option<String>,
    /// On a cluster, workflows only SDK workers serve are known through its Redis.
    #[command(flatten)]
    cluster: ClusterArgs,
    /// What a schedule may hold (its input's size, the tenant's count: `--max-schedules`).
    #[command(flatten)]
    limits: LimitArgs,
    #[command(subcommand)]
    verb: ScheduleVerb,
}

/// What to do.
#[derive(Debug, Subcommand)]
enum ScheduleVerb {
    /// Create a schedule.
    Create {
        /// Its id within the tenant.
        id: String,
        #[command(flatten)]
        fields: FieldArgs,
    },
    /// Change some fields of a schedule; the others stay as they are.
    Update {
        /// The schedule.
        id: String,
        #[command(flatten)]
        fields: FieldArgs,
    },
    /// List the tenant's schedules (every tenant's without `--tenant`).
    List,
    /// Print a schedule and its next five fire times as JSON.
    Show {
        /// The schedule.
        id: String,
    },
    /// Stop firing until resumed.
    Pause {
        /// The schedule.
        id: String,
    },
    /// Fire again from the next tick on (ticks that fell while paused are not fired).
    Resume {
        /// The schedule.
        id: String,
    },
    /// Fire now, by the schedule's overlap policy.
    Trigger {
        /// The schedule.
        id: String,
    },
    /// Delete a schedule; runs it started are left alone.
    Delete {
        /// The schedule.
        id: String,
    },
}

/// A schedule's fields as flags.
#[derive(Debug, Args)]
struct FieldArgs {
    /// The workflow each tick starts.
    #[arg(long)]
    workflow: Option<String>,
    /// The runs' input, as JSON.
    #[arg(long)]
    input: Option<String>,
    /// A cron expression: five fields, or six with seconds first (`"*/5 * * * *"`).
    #[arg(long, conflicts_with = "every")]
    cron: Option<String>,
    /// A fixed interval instead (`30s`, `15m`, `1h`), counted from the Unix epoch.
    #[arg(long)]
    every: Option<String>,
    /// The IANA time zone a cron expression is read in (default `UTC`).
    #[arg(long)]
    timezone: Option<String>,
    /// While the previous run is still going: skip, buffer_one, allow_all or cancel_previous.
    #[arg(long)]
    overlap: Option<String>,
    /// How far back ticks missed while no control plane ran are still fired (default `1m`).
    #[arg(long)]
    catchup_window: Option<String>,
    /// Fire each tick up to this much later, to spread load (default `0s`).
    #[arg(long)]
    jitter: Option<String>,
    /// Create it paused.
    #[arg(long)]
    paused: bool,
}

impl FieldArgs {
    fn fields(self, id: &str) -> anyhow::Result<ScheduleFields> {
        let input = self
            .input
            .map(|raw| serde_json::from_str(&raw).context("--input is not valid JSON"))
            .transpose()?;
        Ok(ScheduleFields {
            id: Some(id.to_owned()),
            workflow: self.workflow,
            input,
            cron: self.cron,
            every: self.every,
            timezone: self.timezone,
            overlap: self.overlap,
            catchup_window: self.catchup_window,
            jitter: self.jitter,
            paused: self.paused.then_some(true),
        })
    }
}

/// Runs a `durable schedule` command against `database_url`.
pub async fn run(database_url: &str, args: ScheduleArgs) -> anyhow::Result<()> {
    let tenant = args
        .tenant
        .as_deref()
        .map(Namespace::parse)
        .transpose()
        .context("invalid --tenant")?;
    let limits = args.limits.limits();
    let engine = operator_engine(
        database_url,
        args.cluster.redis_if_set(),
        durable::EngineConfig {
            limits,
            ..durable::EngineConfig::default()
        },
    )
    .await?;
    let needs_tenant = || {
        tenant
            .clone()
            .context("name the schedule's tenant with --tenant NAME")
    };
    let id_of = |raw: &str| ScheduleId::parse(raw).map_err(anyhow::Error::from);
    let missing = |id: &str| anyhow::anyhow!("the tenant has no schedule `{id}`");
    match args.verb {
        ScheduleVerb::Create { id, fields } => {
            let (id, spec) = fields.fields(&id)?.create()?;
            let schedule = engine.create_schedule(&needs_tenant()?, id, spec).await?;
            print(&schedule)
        }
        ScheduleVerb::Update { id, fields } => {
            let patch = fields.fields(&id)?.patch()?;
            let id = id_of(&id)?;
            let changed = engine
                .update_schedule(&needs_tenant()?, &id, &patch)
                .await?;
            print(&changed.ok_or_else(|| missing(id.as_str()))?)
        }
        ScheduleVerb::List => {
            let scope = tenant.map_or(Scope::All, Scope::Only);
            let mut after: Option<(String, ScheduleId)> = None;
            loop {
                let page = engine
                    .schedules(&scope, after.as_ref().map(|(t, id)| (t.as_str(), id)), 200)
                    .await?;
                for s in &page {
                    let state = if s.spec.paused { "paused" } else { "active" };
                    println!(
                        "{}\t{}\t{}\t{} ({})\t{}",
                        s.namespace, s.id, s.spec.workflow, s.spec.cadence, s.spec.timezone, state
                    );
                }
                match page.last() {
                    Some(last) if page.len() == 200 => {
                        after = Some((last.namespace.to_string(), last.id.clone()));
                    }
                    _ => return Ok(()),
                }
            }
        }
        ScheduleVerb::Show { id } => {
            let id = id_of(&id)?;
            let found = engine.schedule(&needs_tenant()?, &id).await?;
            print(&found.ok_or_else(|| missing(id.as_str()))?)
        }
        ScheduleVerb::Pause { id } => pause(&engine, &needs_tenant()?, &id_of(&id)?, true).await,
        ScheduleVerb::Resume { id } => pause(&engine, &needs_tenant()?, &id_of(&id)?, false).await,
        ScheduleVerb::Trigger { id } => {
            let id = id_of(&id)?;
            let tick = engine.trigger_schedule(&needs_tenant()?, &id).await?;
            let tick = tick.ok_or_else(|| missing(id.as_str()))?;
            println!("{}", serde_json::to_string_pretty(&tick)?);
            Ok(())
        }
        ScheduleVerb::Delete { id } => {
            let id = id_of(&id)?;
            if !engine.delete_schedule(&needs_tenant()?, &id).await? {
                return Err(missing(id.as_str()));
            }
            println!("deleted schedule {id}");
            Ok(())
        }
    }
}

async fn pause(
    engine: &Engine,
    tenant: &Namespace,
    id: &ScheduleId,
    paused: bool,
) -> anyhow::Result<()> {
    let changed = engine
        .update_schedule(tenant, id, &SchedulePatch::pausing(paused))
        .await?;
    print(&changed.ok_or_else(|| anyhow::anyhow!("the tenant has no schedule `{id}`"))?)
}

fn print(schedule: &Schedule) -> anyhow::Result<()> {
    let mut shown = serde_json::to_value(schedule)?;
    shown["next"] = serde_json::to_value(next_fires(schedule, 5))?;
    println!("{}", serde_json::to_string_pretty(&shown)?);
    Ok(())
}
