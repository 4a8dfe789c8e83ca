//! A shared pool's worker on Redis. The tenants it serves are the grants the control planes
//! publish (`P:shared-pool:<pool>:grants`, tenant → weight), read again every few seconds; each
//! tenant's steps wait in queues of their own (`<step>@<tenant>.<pool>`). Each take takes one
//! job, from the tenant furthest behind its weighted share (stride scheduling: a tenant's pass
//! grows by the inverse of its weight per job taken), and the worker holds no more than one job
//! it has not started: a tenant with ten thousand steps waiting takes its share, and another's
//! one step starts at the next free slot instead of behind the backlog. A tenant whose queues
//! were empty when a take passed them gains no credit for it.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use redis::AsyncCommands;
use tokio::sync::{mpsc, watch};

use super::Shared;
use super::consumer::Order;
use super::queue::Taken;
use crate::model::{Namespace, Partition, PoolName};
use crate::transport::naming::{bull_key, partition_token, pool_grants_key, tasks_queue};

/// How often the grants are read again.
const GRANTS_EVERY: Duration = Duration::from_secs(3);
/// A pass step for weight 1; a tenant of weight `w` advances `STRIDE / w` per job.
const STRIDE: u64 = 1 << 20;

/// One queue of the pool: a step's, for one tenant, at the tenant's weight.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Lane {
    /// `P-tasks-<step>@<tenant>.<pool>`.
    pub queue: String,
    /// Whose steps wait there.
    pub tenant: Namespace,
    /// The tenant's weight (at least 1).
    pub weight: u32,
}

/// The lanes of pool `pool` for steps `names`, from the published grants.
fn lanes(p: &str, pool: &PoolName, names: &[String], grants: &[(Namespace, u32)]) -> Vec<Lane> {
    let mut lanes = Vec::with_capacity(grants.len() * names.len());
    for (tenant, weight) in grants {
        let partition = Partition::of_pool(tenant.clone(), pool.clone());
        for name in names {
            lanes.push(Lane {
                queue: tasks_queue(p, &partition_token(name, &partition)),
                tenant: tenant.clone(),
                weight: (*weight).max(1),
            });
        }
    }
    lanes
}

/// Reads `pool`'s grants every [`GRANTS_EVERY`] until `alive` closes, publishing the lanes of
/// steps `names` to `lanes_tx` and their routing tokens to `tokens_tx` (what the worker
/// announces itself on) whenever they change.
pub(super) fn watch_grants(
    shared: Arc<Shared>,
    pool: PoolName,
    names: Vec<String>,
    lanes_tx: watch::Sender<Vec<Lane>>,
    tokens_tx: watch::Sender<Vec<String>>,
    alive: mpsc::Sender<()>,
) {
    tokio::spawn(async move {
        let key = pool_grants_key(&shared.p, pool.as_str());
        let mut conn = shared.conn.clone();
        loop {
            match conn.hgetall::<_, HashMap<String, String>>(&key).await {
                Ok(raw) => {
                    let mut grants: Vec<(Namespace, u32)> = raw
                        .into_iter()
                        .filter_map(|(tenant, weight)| {
                            let tenant = Namespace::tenant(&tenant).ok()?;
                            Some((tenant, weight.parse().ok()?))
                        })
                        .collect();
                    grants.sort();
                    let now = lanes(&shared.p, &pool, &names, &grants);
                    let tokens = grants
                        .iter()
                        .flat_map(|(tenant, _)| {
                            let partition = Partition::of_pool(tenant.clone(), pool.clone());
                            names.iter().map(move |n| partition_token(n, &partition))
                        })
                        .collect();
                    lanes_tx.send_if_modified(|lanes| {
                        let changed = *lanes != now;
                        *lanes = now;
                        changed
                    });
                    tokens_tx.send_if_modified(|old| {
                        let changed = *old != tokens;
                        *old = tokens;
                        changed
                    });
                }
                Err(e) => {
                    tracing::warn!(error = %e, pool = %pool, "cannot read the shared pool's grants; keeping the last ones");
                }
            }
            tokio::select! {
                () = alive.closed() => return,
                () = tokio::time::sleep(GRANTS_EVERY) => {}
            }
        }
    });
}

/// The fair order over a shared pool's lanes (see the module docs).
pub(super) struct Fair {
    lanes: watch::Receiver<Vec<Lane>>,
    current: Vec<Lane>,
    passes: HashMap<Namespace, u64>,
    /// The current take's queues, in order, and the markers of them all.
    queues: Vec<String>,
    markers: Vec<String>,
    /// The tenant of each of `queues`.
    tenants: Vec<Namespace>,
}

impl Fair {
    /// The order over the lanes `lanes` publishes.
    pub(super) fn new(lanes: watch::Receiver<Vec<Lane>>) -> Self {
        Fair {
            lanes,
            current: Vec::new(),
            passes: HashMap::new(),
            queues: Vec::new(),
            markers: Vec::new(),
            tenants: Vec::new(),
        }
    }

    fn pass(&self, tenant: &Namespace) -> u64 {
        self.passes.get(tenant).copied().unwrap_or(0)
    }
}

impl Order for Fair {
    fn next(&mut self) -> (&[String], &[String], usize) {
        if self.lanes.has_changed().unwrap_or(false) || self.current.is_empty() {
            self.current = self.lanes.borrow_and_update().clone();
            self.markers = self
                .current
                .iter()
                .map(|l| bull_key(&l.queue, "marker"))
                .collect();
            // A tenant granted since starts level with the others, not ahead of them.
            let floor = self.passes.values().copied().min().unwrap_or(0);
            for lane in &self.current {
                self.passes.entry(lane.tenant.clone()).or_insert(floor);
            }
            self.passes
                .retain(|tenant, _| self.current.iter().any(|l| &l.tenant == tenant));
        }
        let mut order: Vec<&Lane> = self.current.iter().collect();
        order.sort_by_key(|l| {
            (
                self.passes.get(&l.tenant).copied().unwrap_or(0),
                l.tenant.clone(),
            )
        });
        self.queues = order.iter().map(|l| l.queue.clone()).collect();
        self.tenants = order.iter().map(|l| l.tenant.clone()).collect();
        (&self.queues, &self.markers, 1)
    }

    fn took(&mut self, jobs: &[Taken]) {
        let Some(job) = jobs.first() else {
            return;
        };
        let Some(at) = self
            .queues
            .iter()
            .position(|q| job.job.starts_with(&bull_key(q, "")))
        else {
            return;
        };
        let tenant = self.tenants[at].clone();
        let pass = self.pass(&tenant);
        // The tenants looked at first had nothing waiting: no credit for the time they idled.
        for idle in &self.tenants[..at] {
            if let Some(p) = self.passes.get_mut(idle) {
                *p = (*p).max(pass);
            }
        }
        let weight = self
            .current
            .iter()
            .find(|l| l.tenant == tenant)
            .map_or(1, |l| u64::from(l.weight));
        self.passes.insert(tenant, pass + STRIDE / weight);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taken(queue: &str) -> Taken {
        Taken {
            job: bull_key(queue, "job-1"),
            take: String::new(),
            data: String::new(),
            epoch: 0,
        }
    }

    fn ns(raw: &str) -> Namespace {
        Namespace::tenant(raw).unwrap()
    }

    /// Takes by a tenant of weight 2 and one of weight 1, both always busy, come two to one;
    /// a tenant that comes back from idling starts level, not ahead by what it missed.
    #[test]
    fn takes_follow_the_weights_and_idling_earns_nothing() {
        let pool = PoolName::parse("gpu").unwrap();
        let names = vec!["render".to_owned()];
        let grants = vec![(ns("acme"), 2), (ns("globex"), 1)];
        let (tx, rx) = watch::channel(lanes("d", &pool, &names, &grants));
        let mut fair = Fair::new(rx);
        let mut count: HashMap<String, u32> = HashMap::new();
        for _ in 0..300 {
            let first = fair.next().0[0].clone();
            *count.entry(first.clone()).or_default() += 1;
            fair.took(&[taken(&first)]);
        }
        let acme = count["d-tasks-render@acme.gpu"];
        let globex = count["d-tasks-render@globex.gpu"];
        assert_eq!((acme, globex), (200, 100));

        // initech joins, idles while acme works, then shows up: it does not take a burst.
        let grants = vec![(ns("acme"), 1), (ns("initech"), 1)];
        tx.send(lanes("d", &pool, &names, &grants)).unwrap();
        for _ in 0..50 {
            let queues = fair.next().0.to_vec();
            // initech's queue is empty: the take passes it and takes acme's.
            let acme = queues
                .iter()
                .find(|q| q.contains("@acme."))
                .unwrap()
                .clone();
            fair.took(&[taken(&acme)]);
        }
        let mut initech = 0;
        for _ in 0..10 {
            let first = fair.next().0[0].clone();
            if first.contains("initech") {
                initech += 1;
            }
            fair.took(&[taken(&first)]);
        }
        assert!((4..=6).contains(&initech), "{initech} of 10");
    }
}
