//! The slots of one step consumer, with the last few kept for tenants that hold none.
//!
//! A fair pick decides whose task goes next when a slot frees; it cannot free one. When one
//! tenant's backlog fills every slot of a shared worker with slow steps, another tenant's first
//! step waits for the first of them to end: a whole step's time, however fair the pick. So the
//! last `capacity / 32` slots are headroom: a tenant that holds no slot may take one of them, a
//! tenant that holds some may not. A newcomer's step starts at once; a busy tenant alone loses
//! at most that thirty-second of the worker (none below 32 slots, where a slot is too dear to
//! keep idle), and the slots it does use are shared by the fair pick as before.

use std::collections::HashMap;

use crate::model::Namespace;

/// The part of a consumer's slots kept as headroom: one in this many.
const HEADROOM_DIVISOR: u32 = 32;

/// Which tenants hold a consumer's slots, and whether a tenant may take another.
#[derive(Debug)]
pub struct Headroom {
    capacity: u32,
    reserve: u32,
    held: HashMap<Namespace, u32>,
    total: u32,
}

impl Headroom {
    /// The book of a consumer running `capacity` tasks at once.
    pub fn new(capacity: usize) -> Self {
        let capacity = u32::try_from(capacity.max(1)).unwrap_or(u32::MAX);
        Headroom {
            capacity,
            reserve: capacity / HEADROOM_DIVISOR,
            held: HashMap::new(),
            total: 0,
        }
    }

    /// Whether `tenant` may take a slot the consumer has free: any tenant while more than the
    /// headroom is free, then only a tenant that holds none. (The consumer bounds how many it
    /// runs; this only says whose.)
    pub fn admits(&self, tenant: &Namespace) -> bool {
        self.reserve == 0
            || self.total + self.reserve < self.capacity
            || !self.held.contains_key(tenant)
    }

    /// Books a slot to `tenant`.
    pub fn take(&mut self, tenant: &Namespace) {
        *self.held.entry(tenant.clone()).or_default() += 1;
        self.total += 1;
    }

    /// Gives back a slot `tenant` held.
    pub fn give_back(&mut self, tenant: &Namespace) {
        if let Some(n) = self.held.get_mut(tenant) {
            *n -= 1;
            self.total -= 1;
            if *n == 0 {
                self.held.remove(tenant);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns(name: &str) -> Namespace {
        Namespace::tenant(name).unwrap()
    }

    #[test]
    fn a_busy_tenant_leaves_the_headroom_to_tenants_that_hold_none() {
        let mut slots = Headroom::new(64);
        let (acme, globex, initech) = (ns("acme"), ns("globex"), ns("initech"));
        let mut took = 0;
        while slots.admits(&acme) {
            slots.take(&acme);
            took += 1;
        }
        assert_eq!(took, 62, "two of 64 are headroom");
        assert!(slots.admits(&globex));
        slots.take(&globex);
        assert!(!slots.admits(&globex), "it holds one now");
        assert!(slots.admits(&initech));
        slots.take(&initech);
        slots.give_back(&acme);
        assert!(!slots.admits(&acme), "the freed slot is headroom again");
        slots.give_back(&globex);
        slots.give_back(&initech);
        assert!(slots.admits(&acme));
    }

    #[test]
    fn below_32_slots_there_is_no_headroom() {
        let mut slots = Headroom::new(31);
        let acme = ns("acme");
        // Not even past its capacity, which the consumer bounds, not the book: a consumer
        // that has not reported its tasks done yet still gets the next.
        for _ in 0..40 {
            assert!(slots.admits(&acme));
            slots.take(&acme);
        }
    }

    #[test]
    fn giving_back_what_was_never_taken_changes_nothing() {
        let mut slots = Headroom::new(32);
        slots.give_back(&ns("acme"));
        slots.take(&ns("acme"));
        assert!(slots.admits(&ns("acme")), "31 of 32 are free");
        assert_eq!(slots.total, 1);
    }
}
