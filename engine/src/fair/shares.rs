//! A pool of slots shared between tenants by weight: the engine's turn slots.
//!
//! Turns take a slot in two ways: directly (a start that turns its run at once, a result that
//! turns its parked run) and through the claim loop, which picks waiting runs by
//! [`crate::fair::FairQueue`]. A fair pick alone splits nothing when the direct ways take every
//! slot that frees before the claim loop gets to it: the split then follows whoever calls most.
//! So a direct take is refused to a tenant that holds its weighted share already while another
//! tenant has work waiting for a slot; its run waits for the claim loop like everyone's, and the
//! slots it gives back go to the claim loop's picks, which count what each tenant took directly
//! as service ([`Shares::take_direct_counts`]). With no one else waiting, a tenant may hold
//! every slot: the pool stays work-conserving.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::Weight;
use crate::model::Namespace;

/// A fixed number of slots, shared between tenants by weight while more than one wants them.
#[derive(Debug)]
pub struct Shares {
    total: u32,
    permits: Arc<Semaphore>,
    book: Mutex<Book>,
}

/// Who holds slots and who waits for one.
#[derive(Debug, Default)]
struct Book {
    /// Slots each tenant holds, with its weight as of its last take.
    held: HashMap<Namespace, (u32, Weight)>,
    /// The tenants with work waiting for a slot, with their weights.
    waiting: HashMap<Namespace, Weight>,
    /// Slots taken directly per tenant since [`Shares::take_direct_counts`] last asked.
    direct: HashMap<Namespace, u32>,
    /// Tenants with a run put on record to wait for the claim loop since
    /// [`Shares::clear_arrivals`], with their weights.
    arrivals: HashMap<Namespace, Weight>,
}

/// One slot of a [`Shares`], booked to a tenant until dropped.
#[derive(Debug)]
pub struct Slot {
    shares: Arc<Shares>,
    tenant: Namespace,
    // Dropped after `Drop::drop` has unbooked the slot, so whoever the permit wakes sees the
    // book as it is.
    _permit: OwnedSemaphorePermit,
}

impl Shares {
    /// A pool of `total` slots (at least one).
    pub fn new(total: usize) -> Self {
        let total = total.clamp(1, Semaphore::MAX_PERMITS.min(u32::MAX as usize));
        Shares {
            total: total as u32,
            permits: Arc::new(Semaphore::new(total)),
            book: Mutex::default(),
        }
    }

    fn book(&self) -> MutexGuard<'_, Book> {
        // A poisoned lock only means a panic between plain map operations.
        self.book.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Slots free now.
    pub fn free(&self) -> u32 {
        self.permits.available_permits() as u32
    }

    /// A slot for `tenant` on a direct path, if one is free and the tenant may take it: below
    /// its share, or with no other tenant waiting. Refused, the tenant is noted as waiting (its
    /// run goes to the claim loop).
    pub fn try_take(self: &Arc<Self>, tenant: &Namespace, weight: Weight) -> Option<Slot> {
        let mut book = self.book();
        let permit = if book.others_wait(tenant)
            && book.holds(tenant) >= book.share(self.total, tenant, weight)
        {
            None
        } else {
            self.permits.clone().try_acquire_owned().ok()
        };
        match permit {
            Some(permit) => {
                *book.direct.entry(tenant.clone()).or_default() += 1;
                Some(self.booked(&mut book, tenant, weight, permit))
            }
            None => {
                // Its run waits for the claim loop now: until that loop's next look says who
                // waits, the slots that free are left to the tenants below their share.
                book.waiting.insert(tenant.clone(), weight);
                None
            }
        }
    }

    /// A slot for a turn whose tenant is not known yet (a result read from no run), if one is
    /// free and no tenant waits for one; booked to the system tenant until
    /// [`Slot::hand_to`].
    pub fn try_take_unplaced(self: &Arc<Self>) -> Option<Slot> {
        let mut book = self.book();
        if !book.waiting.is_empty() {
            return None;
        }
        let permit = self.permits.clone().try_acquire_owned().ok()?;
        Some(self.booked(&mut book, &Namespace::system(), Weight::default(), permit))
    }

    /// A slot for `tenant` if one is free, whatever its share: for the claim loop, whose picks
    /// are fair already.
    pub fn try_take_any(self: &Arc<Self>, tenant: &Namespace, weight: Weight) -> Option<Slot> {
        let mut book = self.book();
        let permit = self.permits.clone().try_acquire_owned().ok()?;
        Some(self.booked(&mut book, tenant, weight, permit))
    }

    /// Waits until a slot is free (without taking it).
    pub async fn freed(&self) {
        if let Ok(permit) = self.permits.acquire().await {
            drop(permit);
        }
    }

    /// Waits until every slot is free, that is, until no turn holds one.
    pub async fn all_free(&self) {
        if let Ok(permits) = self.permits.acquire_many(self.total).await {
            drop(permits);
        }
    }

    /// The slots each tenant took directly (not through the claim loop's picks) since the last
    /// call: service the claim loop's fair queue charges them for, so its order weighs every
    /// turn a tenant got.
    pub fn take_direct_counts(&self) -> HashMap<Namespace, u32> {
        std::mem::take(&mut self.book().direct)
    }

    /// Notes that a run of `tenant` is on record waiting for the claim loop (its start or
    /// result found no slot it could take). The claim loop trusts a read of a deep backlog for
    /// a while; a tenant whose runs that read held all of has work it does not know of now.
    /// Until the claim loop's next read, the tenant counts as waiting for a slot, whatever the
    /// loop's older view says.
    pub fn note_arrival(&self, tenant: &Namespace, weight: Weight) {
        let mut book = self.book();
        // Called for each run that waits: the tenant's name is cloned only the first time.
        if !book.arrivals.contains_key(tenant) {
            book.arrivals.insert(tenant.clone(), weight);
        }
        if !book.waiting.contains_key(tenant) {
            book.waiting.insert(tenant.clone(), weight);
        }
    }

    /// Whether a run of a tenant `known` does not cover arrived since [`Shares::clear_arrivals`].
    pub fn arrived_beyond(&self, known: impl Fn(&Namespace) -> bool) -> bool {
        self.book().arrivals.keys().any(|t| !known(t))
    }

    /// Forgets the arrivals noted so far: for the claim loop, just before it reads what waits
    /// (which then holds every run put on record before).
    pub fn clear_arrivals(&self) {
        self.book().arrivals.clear();
    }

    /// Notes the tenants whose work waits for a slot now: the claim loop's latest view, and
    /// those with runs put on record since it read (see [`Shares::note_arrival`]).
    pub fn set_waiting(&self, waiting: impl IntoIterator<Item = (Namespace, Weight)>) {
        let mut book = self.book();
        let mut now: HashMap<Namespace, Weight> = waiting.into_iter().collect();
        for (tenant, weight) in &book.arrivals {
            now.entry(tenant.clone()).or_insert(*weight);
        }
        book.waiting = now;
    }

    fn booked(
        self: &Arc<Self>,
        book: &mut Book,
        tenant: &Namespace,
        weight: Weight,
        permit: OwnedSemaphorePermit,
    ) -> Slot {
        book.hold(tenant, weight);
        Slot {
            shares: self.clone(),
            tenant: tenant.clone(),
            _permit: permit,
        }
    }
}

impl Book {
    fn holds(&self, tenant: &Namespace) -> u32 {
        self.held.get(tenant).map_or(0, |(n, _)| *n)
    }

    fn others_wait(&self, tenant: &Namespace) -> bool {
        self.waiting.keys().any(|t| t != tenant)
    }

    /// `tenant`'s share of `total` slots among the tenants holding or waiting for one and
    /// itself, by weight, rounded up (so every tenant's share is at least one slot).
    fn share(&self, total: u32, tenant: &Namespace, weight: Weight) -> u32 {
        let mut weights: HashMap<&Namespace, u64> = self
            .held
            .iter()
            .map(|(t, (_, w))| (t, u64::from(w.get())))
            .collect();
        for (t, w) in &self.waiting {
            weights.insert(t, u64::from(w.get()));
        }
        weights.insert(tenant, u64::from(weight.get()));
        let sum: u64 = weights.values().sum();
        let share = (u64::from(total) * u64::from(weight.get())).div_ceil(sum.max(1));
        u32::try_from(share).unwrap_or(u32::MAX)
    }

    fn hold(&mut self, tenant: &Namespace, weight: Weight) {
        let entry = self.held.entry(tenant.clone()).or_insert((0, weight));
        *entry = (entry.0 + 1, weight);
    }

    fn release(&mut self, tenant: &Namespace) {
        if let Some((n, _)) = self.held.get_mut(tenant) {
            *n -= 1;
            if *n == 0 {
                self.held.remove(tenant);
            }
        }
    }
}

impl Slot {
    /// Books the slot to `tenant` instead, once its turn's tenant is known.
    pub fn hand_to(&mut self, tenant: &Namespace, weight: Weight) {
        if *tenant == self.tenant {
            return;
        }
        let mut book = self.shares.book();
        book.release(&self.tenant);
        book.hold(tenant, weight);
        *book.direct.entry(tenant.clone()).or_default() += 1;
        self.tenant = tenant.clone();
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.shares.book().release(&self.tenant);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns(name: &str) -> Namespace {
        Namespace::tenant(name).unwrap()
    }

    #[test]
    fn an_arrival_is_news_until_cleared_unless_known() {
        let shares = Shares::new(4);
        assert!(!shares.arrived_beyond(|_| false));
        shares.note_arrival(&ns("globex"), Weight::default());
        shares.note_arrival(&ns("globex"), Weight::default());
        assert!(shares.arrived_beyond(|_| false));
        assert!(!shares.arrived_beyond(|t| *t == ns("globex")));
        shares.note_arrival(&ns("acme"), Weight::default());
        assert!(shares.arrived_beyond(|t| *t == ns("globex")));
        shares.clear_arrivals();
        assert!(!shares.arrived_beyond(|_| false));
    }

    /// A tenant whose run arrived after the claim loop's last read waits for a slot although
    /// that read's view does not hold it: until the next read, a tenant over its share is
    /// refused the slots that free.
    #[test]
    fn an_arrival_waits_until_the_claim_loop_reads_again() {
        let shares = Arc::new(Shares::new(4));
        let w = Weight::default();
        let held: Vec<Slot> = (0..3)
            .map(|_| shares.try_take(&ns("acme"), w).expect("alone, acme takes"))
            .collect();
        shares.note_arrival(&ns("globex"), w);
        // The claim loop's view, from before globex's run arrived.
        shares.set_waiting([(ns("acme"), w)]);
        assert!(
            shares.try_take(&ns("acme"), w).is_none(),
            "acme over its share"
        );
        // Read again: the view is what the read found (globex's run was picked meanwhile).
        shares.clear_arrivals();
        shares.set_waiting([]);
        assert!(shares.try_take(&ns("acme"), w).is_some());
        drop(held);
    }

    #[test]
    fn alone_a_tenant_may_take_every_slot() {
        let shares = Arc::new(Shares::new(4));
        let acme = ns("acme");
        shares.set_waiting([(acme.clone(), Weight::default())]);
        let held: Vec<Slot> = (0..4)
            .map_while(|_| shares.try_take(&acme, Weight::default()))
            .collect();
        assert_eq!(held.len(), 4);
        assert!(shares.try_take(&acme, Weight::default()).is_none());
    }

    #[test]
    fn over_its_share_a_tenant_is_refused_while_another_waits() {
        let shares = Arc::new(Shares::new(4));
        let (acme, globex) = (ns("acme"), ns("globex"));
        let mut held: Vec<Slot> = (0..3)
            .map_while(|_| shares.try_take(&acme, Weight::default()))
            .collect();
        assert_eq!(held.len(), 3, "no one waits yet");
        shares.set_waiting([(globex.clone(), Weight::default())]);
        assert!(shares.try_take(&acme, Weight::default()).is_none());
        held.push(shares.try_take(&globex, Weight::default()).unwrap());
        held.truncate(1);
        // acme holds 1 of its 2: it may take one more, not two.
        held.push(shares.try_take(&acme, Weight::default()).unwrap());
        assert!(shares.try_take(&acme, Weight::default()).is_none());
    }

    #[test]
    fn shares_follow_the_weights() {
        let shares = Arc::new(Shares::new(12));
        let (acme, globex, initech) = (ns("acme"), ns("globex"), ns("initech"));
        let weights = [
            (acme.clone(), Weight::new(3)),
            (globex.clone(), Weight::new(2)),
            (initech.clone(), Weight::new(1)),
        ];
        shares.set_waiting(weights.clone());
        let mut held = Vec::new();
        let mut took = Vec::new();
        for (tenant, weight) in &weights {
            let mine: Vec<Slot> = std::iter::from_fn(|| shares.try_take(tenant, *weight)).collect();
            took.push(mine.len());
            held.extend(mine);
        }
        assert_eq!(took, [6, 4, 2]);
    }

    #[test]
    fn a_slot_handed_to_a_tenant_counts_as_its_own() {
        let shares = Arc::new(Shares::new(2));
        let (acme, globex) = (ns("acme"), ns("globex"));
        let mut slot = shares.try_take_unplaced().unwrap();
        slot.hand_to(&acme, Weight::default());
        shares.set_waiting([(globex.clone(), Weight::default())]);
        assert!(shares.try_take(&acme, Weight::default()).is_none());
        assert!(shares.try_take_unplaced().is_none(), "someone waits");
        drop(slot);
        assert!(
            shares.try_take(&acme, Weight::default()).is_some(),
            "below its share now"
        );
    }
}
