//! The queue the group-commit lanes take writes from, and which idle lane is woken for a write:
//! the one that went idle last.
//!
//! Writes that come one at a time (a run at a time, say) then all go to the same lane, so to the
//! same PostgreSQL backend, which is warm. Woken in turn, as waiters on one channel are, the lanes
//! handed each lone write to a backend that had been idle for the last few writes: a run through
//! the cluster bench took about 5% longer one at a time with four lanes than with a single one.
//! A burst still spreads over every lane: each write queued wakes another idle lane, and a lane
//! that finishes a batch takes what is queued before it goes idle.
//!
//! Lanes take queued writes fairly between tenants (each write in the [`Lane`] its caller set),
//! not in arrival order, so a quiet tenant's write is the next one a lane takes however many of a
//! busy tenant's are queued. And one more lane, the express lane, takes only writes of tenants
//! none of whose writes the other lanes are running: a busy tenant keeps every ordinary lane
//! busy with its batches, and a quiet tenant's write would otherwise wait for one of them to
//! finish before its own batch could even begin. A tenant alone never uses it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;

use crate::fair::{FairQueue, Lane};
use crate::model::Namespace;

/// Queued items, in line by tenant, and how many lanes still take from them.
type Line<T> = Mutex<Items<T>>;

struct Items<T> {
    line: FairQueue<Namespace, String, T>,
    /// Lanes not yet stopped (their runtime may shut down under them). Once none is left,
    /// what is queued is dropped, so its writers hear that it was never run.
    takers: usize,
    /// How many writes of each tenant the ordinary lanes are running.
    running: HashMap<Namespace, usize>,
}

/// The writing end. The lanes stop once it is dropped and they have taken what is queued.
pub(super) struct Queue<T> {
    items: Arc<Line<T>>,
    idle: Arc<Idle>,
}

/// One lane's end.
pub(super) struct Taker<T> {
    items: Arc<Line<T>>,
    idle: Arc<Idle>,
    lane: usize,
    /// Whether this is the express lane.
    express: bool,
    /// The tenants of the writes an ordinary lane took for the batch it runs.
    taken: Mutex<Vec<Namespace>>,
}

/// The lanes waiting for work.
struct Idle {
    /// Their numbers, the one that went idle last at the end.
    waiting: Mutex<Vec<usize>>,
    /// One per lane: poked when it is taken off `waiting` for a write (or to see the end).
    wake: Vec<Notify>,
    /// Set once the writing end is gone.
    closed: AtomicBool,
}

/// A queue taken from by `lanes` ordinary lanes and the express lane, and each lane's end (the
/// express lane's last).
pub(super) fn queue<T>(lanes: usize) -> (Queue<T>, Vec<Taker<T>>) {
    let all = lanes + 1;
    let items = Arc::new(Mutex::new(Items {
        line: FairQueue::new(),
        takers: all,
        running: HashMap::new(),
    }));
    let idle = Arc::new(Idle {
        waiting: Mutex::new(Vec::with_capacity(all)),
        wake: (0..all).map(|_| Notify::new()).collect(),
        closed: AtomicBool::new(false),
    });
    let takers = (0..all)
        .map(|lane| Taker {
            items: items.clone(),
            idle: idle.clone(),
            lane,
            express: lane == lanes,
            taken: Mutex::new(Vec::new()),
        })
        .collect();
    (Queue { items, idle }, takers)
}

impl<T> Queue<T> {
    /// Queues `item` in `lane` and wakes the lane that went idle last, if any is idle. Hands
    /// `item` back if every lane has stopped.
    pub fn push(&self, lane: Lane, item: T) -> Result<(), T> {
        let express = {
            let mut items = lock(&self.items);
            if items.takers == 0 {
                return Err(item);
            }
            let express = !items.running.contains_key(&lane.tenant);
            items.line.set_weight(lane.tenant.clone(), lane.weight);
            items.line.push(lane.tenant, lane.key, 0, item);
            express
        };
        // An idle ordinary lane if there is one, else the express lane if the write may go there.
        let express_lane = self.idle.wake.len() - 1;
        let woken = {
            let mut idle = lock(&self.idle.waiting);
            match idle.iter().rposition(|lane| *lane != express_lane) {
                Some(at) => Some(idle.remove(at)),
                None if express => idle
                    .iter()
                    .position(|lane| *lane == express_lane)
                    .map(|at| idle.remove(at)),
                None => None,
            }
        };
        if let Some(lane) = woken {
            self.idle.wake[lane].notify_one();
        }
        Ok(())
    }

    /// How many items are queued and not taken yet.
    pub fn len(&self) -> usize {
        lock(&self.items).line.len()
    }
}

impl<T> Drop for Queue<T> {
    fn drop(&mut self) {
        self.idle.closed.store(true, Ordering::SeqCst);
        for wake in &self.idle.wake {
            wake.notify_one();
        }
    }
}

impl<T> Drop for Taker<T> {
    fn drop(&mut self) {
        self.done();
        let mut items = lock(&self.items);
        items.takers -= 1;
        if items.takers == 0 {
            // No lane is left to run them: dropped, their writers hear so.
            while items.line.pop().is_some() {}
        }
    }
}

/// Locks `held`: what it guards stays valid whatever panicked while it was held.
fn lock<V>(held: &Mutex<V>) -> MutexGuard<'_, V> {
    held.lock().unwrap_or_else(|p| p.into_inner())
}

impl<T> Taker<T> {
    /// The next item: at once if one is queued, else once one is pushed for this lane; `None`
    /// once the writing end is gone and nothing is left.
    pub async fn next(&self) -> Option<T> {
        self.done();
        loop {
            if let Some(next) = self.take() {
                return next;
            }
            // Listed before looking again, so an item pushed in between either is seen now or
            // wakes this lane (a wake that finds the item taken by another lane costs one look).
            lock(&self.idle.waiting).push(self.lane);
            if let Some(next) = self.take() {
                lock(&self.idle.waiting).retain(|lane| *lane != self.lane);
                return next;
            }
            self.idle.wake[self.lane].notified().await;
        }
    }

    /// The next item if one is queued, for a lane filling its batch.
    pub fn try_next(&self) -> Option<T> {
        let mut items = lock(&self.items);
        if self.express {
            let Items { line, running, .. } = &mut *items;
            return line
                .pop_if(|tenant| !running.contains_key(tenant))
                .map(|(_, _, item)| item);
        }
        let (tenant, _, item) = items.line.pop()?;
        *items.running.entry(tenant.clone()).or_default() += 1;
        drop(items);
        lock(&self.taken).push(tenant);
        Some(item)
    }

    /// Notes that the batch this lane took its items for is over.
    fn done(&self) {
        let taken = std::mem::take(&mut *lock(&self.taken));
        if taken.is_empty() {
            return;
        }
        let mut items = lock(&self.items);
        for tenant in taken {
            if let Some(n) = items.running.get_mut(&tenant) {
                *n -= 1;
                if *n == 0 {
                    items.running.remove(&tenant);
                }
            }
        }
    }

    /// `Some(Some(item))` if one is queued, `Some(None)` once the queue is over, `None` if it is
    /// merely empty.
    fn take(&self) -> Option<Option<T>> {
        match self.try_next() {
            Some(item) => Some(Some(item)),
            None if self.idle.closed.load(Ordering::SeqCst) => Some(None),
            None => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// Lone items all go to the lane that went idle last; with every lane busy, items wait for
    /// the first lane to come back; and dropping the writing end stops every lane.
    #[tokio::test]
    async fn the_lane_idle_last_takes_the_next_item() {
        let (queue, takers) = queue::<(u32, tokio::sync::oneshot::Sender<usize>)>(3);
        let (done_tx, mut done) = tokio::sync::mpsc::unbounded_channel();
        for taker in takers {
            let done = done_tx.clone();
            tokio::spawn(async move {
                while let Some((_, reply)) = taker.next().await {
                    let _ = reply.send(taker.lane);
                }
                let _ = done.send(taker.lane);
            });
        }
        drop(done_tx);
        // Let every lane go idle: lane 2, listed last, is woken first.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let mut lanes = Vec::new();
        for n in 0..5 {
            let (reply, answer) = tokio::sync::oneshot::channel();
            assert!(queue.push(Lane::system(), (n, reply)).is_ok());
            lanes.push(answer.await.expect("answered"));
            // Idle again before the next item.
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(
            lanes.iter().all(|lane| *lane == lanes[0]),
            "one lane took every lone item: {lanes:?}"
        );
        drop(queue);
        let mut stopped = Vec::new();
        while let Some(lane) = tokio::time::timeout(Duration::from_secs(2), done.recv())
            .await
            .expect("every lane stops")
        {
            stopped.push(lane);
        }
        stopped.sort();
        assert_eq!(
            stopped,
            vec![0, 1, 2, 3],
            "the three lanes and the express lane"
        );
    }

    /// A quiet tenant's item is among the next taken, however many of a busy tenant's wait;
    /// once every lane has stopped, a push is refused and nothing queued is kept.
    #[test]
    fn lanes_take_items_fairly_between_tenants() {
        let (queue, mut takers) = queue::<&'static str>(1);
        let of = |tenant: &str| Lane {
            tenant: Namespace::parse(tenant).unwrap(),
            key: "w".into(),
            weight: crate::fair::Weight::default(),
        };
        for _ in 0..100 {
            assert!(queue.push(of("acme"), "acme").is_ok());
        }
        assert!(queue.push(of("globex"), "globex").is_ok());
        let ordinary = takers.remove(0);
        let first = [ordinary.try_next(), ordinary.try_next()];
        assert!(first.contains(&Some("globex")), "{first:?}");
        drop(ordinary);
        drop(takers);
        assert_eq!(queue.len(), 0);
        assert!(queue.push(of("acme"), "late").is_err());
    }

    /// The express lane takes only writes of tenants the ordinary lanes are not running, and a
    /// tenant counts as running there until its lane's batch is over.
    #[tokio::test]
    async fn the_express_lane_takes_only_tenants_the_others_do_not_run() {
        let (queue, mut takers) = queue::<&'static str>(1);
        let of = |tenant: &str| Lane {
            tenant: Namespace::parse(tenant).unwrap(),
            key: "w".into(),
            weight: crate::fair::Weight::default(),
        };
        let express = takers.pop().unwrap();
        let ordinary = takers.pop().unwrap();
        for _ in 0..3 {
            assert!(queue.push(of("acme"), "acme").is_ok());
        }
        assert_eq!(ordinary.next().await, Some("acme"));
        assert_eq!(express.try_next(), None, "acme runs in the ordinary lane");
        assert!(queue.push(of("globex"), "globex").is_ok());
        assert_eq!(express.try_next(), Some("globex"));
        // The ordinary lane's batch is over when it asks for the next: acme may go express.
        assert_eq!(ordinary.next().await, Some("acme"));
        assert_eq!(express.try_next(), None);
        ordinary.done();
        assert_eq!(express.try_next(), Some("acme"));
    }

    /// Items pushed while every lane is busy are all taken, none lost.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_burst_is_taken_whole() {
        let (queue, takers) = queue::<u32>(4);
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        for taker in takers {
            let tx = tx.clone();
            tokio::spawn(async move {
                while let Some(n) = taker.next().await {
                    tokio::task::yield_now().await;
                    let _ = tx.send(n);
                }
            });
        }
        drop(tx);
        for n in 0..10_000 {
            assert!(queue.push(Lane::system(), n).is_ok());
        }
        drop(queue);
        let mut seen = Vec::new();
        while let Some(n) = rx.recv().await {
            seen.push(n);
        }
        seen.sort();
        assert_eq!(seen, (0..10_000).collect::<Vec<_>>());
    }
}
