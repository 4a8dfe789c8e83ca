//! `durable prune [--dry-run] [--tenant T]`: deleting, now, the finished history tenants'
//! plans no longer keep (every control plane also does it once a minute), or with `--dry-run`
//! saying what would go. One line per tenant with a retention.

use anyhow::Context;
use clap::Args;
use durable::model::{Namespace, Scope};
use durable::retention::{expiries, prune};

use crate::database::open_store;

/// `durable prune` options.
#[derive(Debug, Args)]
pub struct PruneArgs {
    /// Only count what would be deleted; delete nothing.
    #[arg(long)]
    dry_run: bool,
    /// Only this tenant's history (`default` for a standalone server's own).
    #[arg(long)]
    tenant: Option<String>,
}

/// Prunes (or counts) and prints one line per tenant with a retention.
pub async fn run(database_url: &str, args: PruneArgs) -> anyhow::Result<()> {
    let scope = match &args.tenant {
        Some(tenant) => Scope::Only(Namespace::parse(tenant).context("invalid --tenant")?),
        None => Scope::All,
    };
    let store = open_store(database_url).await?.store;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let due = expiries(&*store, &scope, now).await?;
    if due.is_empty() {
        println!(
            "no tenant here has a retention: history is kept forever (set one with `durable tenant plan set --default --retention-days N`)"
        );
        return Ok(());
    }
    for expiry in due {
        let kept = match expiry.days {
            1 => "1 day".to_owned(),
            days => format!("{days} days"),
        };
        if args.dry_run {
            let n = store
                .prunable_runs(&expiry.tenant, expiry.finished_before)
                .await?;
            println!("{}: keeps {kept}; {n} runs would be deleted", expiry.tenant);
        } else {
            let n = prune(&*store, &expiry, || true).await?;
            println!("{}: keeps {kept}; {n} runs deleted", expiry.tenant);
        }
    }
    Ok(())
}
