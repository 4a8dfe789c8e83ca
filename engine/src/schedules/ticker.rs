//! The ticker: every control plane claims the schedules due in its scope and fires their
//! ticks, then sleeps until the earliest next one.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::watch;
use tokio::time::Instant;

use super::tick;
use crate::engine::Engine;
use crate::model::{Millis, Namespace};
use crate::store::ScheduleRow;

/// The most schedules one claim takes.
const BATCH: usize = 256;
/// How many ticks fire at once.
const AT_ONCE: usize = 32;
/// How long a claim keeps other control planes off a schedule; one that crashed mid-tick has
/// its schedule fired again after this, which starts no second run (the run id is the tick's).
const CLAIM_FOR: Millis = 10_000;
/// How often an idle ticker looks for schedules other processes created.
const POLL: Duration = Duration::from_secs(1);

/// Fires due ticks until `stop`.
pub(crate) async fn ticker_loop(engine: Engine, mut stop: watch::Receiver<bool>) {
    let state = engine.state.clone();
    loop {
        let now = state.clock.now();
        let claimed = state
            .store
            .claim_schedules(&state.scope, now, now + CLAIM_FOR, BATCH)
            .await;
        let full = match claimed {
            Ok(rows) => {
                let full = rows.len() == BATCH;
                fire(&engine, rows, now).await;
                full
            }
            Err(e) => {
                tracing::warn!(error = %e, "could not claim due schedules; trying again shortly");
                false
            }
        };
        if full {
            continue;
        }
        let poll_at = Instant::now() + POLL;
        let due = state
            .store
            .next_schedule_due(&state.scope)
            .await
            .ok()
            .flatten()
            .unwrap_or(Millis::MAX);
        tokio::select! {
            _ = stop.changed() => return,
            () = state.wait_until(due, poll_at) => {}
            () = state.schedules_changed.notified() => {}
        }
    }
}

/// Fires `rows`, a few at once, taking the tenants in turn so that one tenant's thousand
/// schedules due this second do not go before another's one.
async fn fire(engine: &Engine, rows: Vec<ScheduleRow>, now: Millis) {
    let mut by_tenant: BTreeMap<Namespace, VecDeque<ScheduleRow>> = BTreeMap::new();
    for row in rows {
        by_tenant
            .entry(row.schedule.namespace.clone())
            .or_default()
            .push_back(row);
    }
    let mut in_turn = Vec::new();
    while !by_tenant.is_empty() {
        by_tenant.retain(|_, rows| match rows.pop_front() {
            Some(row) => {
                in_turn.push(row);
                !rows.is_empty()
            }
            None => false,
        });
    }
    futures::stream::iter(in_turn)
        .map(|row| tick::handle_claimed(engine, row, now))
        .buffer_unordered(AT_ONCE)
        .collect::<()>()
        .await;
}
