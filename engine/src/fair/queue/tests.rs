use std::collections::HashMap;

use super::{FairQueue, Weight};

/// Serves `n` items and counts them by tenant.
fn serve(q: &mut FairQueue<&'static str, String, u32>, n: usize) -> HashMap<&'static str, usize> {
    let mut served = HashMap::new();
    for _ in 0..n {
        let (tenant, _, _) = q.pop().expect("work waits");
        *served.entry(tenant).or_default() += 1;
    }
    served
}

#[test]
fn a_tenant_with_a_handful_is_not_starved_by_one_with_thousands_over_many_keys() {
    let mut q = FairQueue::new();
    for i in 0..10_000u32 {
        q.push("acme", format!("workflow-{}", i % 50), 0, i);
    }
    for i in 0..20u32 {
        q.push("globex", "order".to_owned(), 1_000, i);
    }
    // Even though acme's work is all due earlier and spread over 50 keys, globex is served
    // every other time until its 20 items are out.
    let served = serve(&mut q, 40);
    assert_eq!(served.get("globex"), Some(&20));
    assert_eq!(served.get("acme"), Some(&20));
}

#[test]
fn weights_split_the_service_three_two_one_under_saturation() {
    let mut q = FairQueue::new();
    q.set_weight("a", Weight::new(3));
    q.set_weight("b", Weight::new(2));
    q.set_weight("c", Weight::new(1));
    for i in 0..10_000u32 {
        for tenant in ["a", "b", "c"] {
            q.push(tenant, format!("k{}", i % 7), i64::from(i), i);
        }
    }
    let served = serve(&mut q, 6_000);
    let share = |t| served.get(t).copied().unwrap_or(0) as f64 / 6_000.0;
    for (tenant, want) in [("a", 3.0 / 6.0), ("b", 2.0 / 6.0), ("c", 1.0 / 6.0)] {
        let got = share(tenant);
        assert!(
            (got - want).abs() <= want * 0.1,
            "{tenant}: {got} of the service, want {want}"
        );
    }
}

#[test]
fn an_idle_tenant_banks_no_credit_and_its_share_goes_to_the_others() {
    let mut q = FairQueue::new();
    for i in 0..100u32 {
        q.push("acme", "k".to_owned(), 0, i);
    }
    // Only acme has work: it gets all of the service.
    assert_eq!(serve(&mut q, 50).get("acme"), Some(&50));
    // globex arrives after acme was served 50 times: it is not owed 50 in a row, the two
    // alternate from here.
    for i in 0..10u32 {
        q.push("globex", "k".to_owned(), 0, i);
    }
    let served = serve(&mut q, 10);
    assert_eq!(served.get("globex"), Some(&5));
    assert_eq!(served.get("acme"), Some(&5));
}

#[test]
fn within_a_tenant_keys_take_turns_and_each_key_goes_earliest_due_first() {
    let mut q = FairQueue::new();
    q.push("acme", "a".to_owned(), 30, 1);
    q.push("acme", "a".to_owned(), 10, 2);
    q.push("acme", "a".to_owned(), 20, 3);
    q.push("acme", "b".to_owned(), 50, 4);
    let order: Vec<_> = std::iter::from_fn(|| q.pop())
        .map(|(_, key, item)| (key, item))
        .collect();
    assert_eq!(
        order,
        vec![
            ("a".to_owned(), 2),
            ("b".to_owned(), 4),
            ("a".to_owned(), 3),
            ("a".to_owned(), 1)
        ]
    );
    assert!(q.is_empty());
}

#[test]
fn between_tenants_level_on_service_the_earliest_due_goes_first() {
    let mut q = FairQueue::new();
    q.push("acme", "k".to_owned(), 500, 1);
    q.push("globex", "k".to_owned(), 100, 2);
    let (tenant, _, _) = q.pop().expect("work waits");
    assert_eq!(tenant, "globex");
    assert_eq!(q.len(), 1);
}

#[test]
fn refilling_each_round_keeps_the_tenants_places() {
    // The claim loop's use: every round reads what waits again and takes one. acme's work is
    // always due first, so without passes that outlive the reads acme would win every round.
    let mut q: FairQueue<&'static str, String, u32> = FairQueue::new();
    let (mut acme_next, mut globex_next) = (0u32, 0u32);
    let mut served = HashMap::<&str, usize>::new();
    for _ in 0..100 {
        let waiting = (acme_next..acme_next + 4)
            .map(|i| ("acme", format!("w{}", i % 5), i64::from(i), i))
            .chain(
                (globex_next..globex_next + 4)
                    .map(|i| ("globex", "w".into(), 1_000_000 + i64::from(i), i)),
            );
        q.refill(waiting.collect::<Vec<_>>());
        let (tenant, _, _) = q.pop().expect("work waits");
        *served.entry(tenant).or_default() += 1;
        match tenant {
            "acme" => acme_next += 1,
            _ => globex_next += 1,
        }
    }
    assert_eq!(served.get("acme"), Some(&50));
    assert_eq!(served.get("globex"), Some(&50));
}

#[test]
fn a_tenant_back_after_a_refill_without_it_gets_no_credit_for_its_absence() {
    let mut q: FairQueue<&'static str, String, u32> = FairQueue::new();
    q.refill(
        (0..100)
            .map(|i| ("acme", "w".to_owned(), i64::from(i), i))
            .collect::<Vec<_>>(),
    );
    for _ in 0..50 {
        q.pop();
    }
    // globex arrives now: it alternates with acme rather than taking 50 in a row.
    q.refill(
        (50..100)
            .map(|i| ("acme", "w".to_owned(), i64::from(i), i))
            .chain((0..50).map(|i| ("globex", "w".to_owned(), 10_000, i)))
            .collect::<Vec<_>>(),
    );
    let served = serve(&mut q, 20);
    assert_eq!(served.get("acme"), Some(&10));
    assert_eq!(served.get("globex"), Some(&10));
}

#[test]
fn a_refunded_pick_leaves_the_tenant_where_it_was() {
    let mut q = FairQueue::new();
    q.set_weight("a", Weight::new(1));
    q.set_weight("b", Weight::new(1));
    for i in 0..10u32 {
        q.push("a", "k".to_owned(), 0, i);
        q.push("b", "k".to_owned(), 1, i);
    }
    // `a` is picked, but someone else took the item: refunded, `a` is still first in line.
    let (first, _, _) = q.pop().unwrap();
    assert_eq!(first, "a");
    q.refund(&"a");
    let (again, _, _) = q.pop().unwrap();
    assert_eq!(again, "a", "the lost race cost `a` nothing");
    let (then, _, _) = q.pop().unwrap();
    assert_eq!(then, "b");
}

#[test]
fn service_charged_from_outside_counts_only_while_another_tenant_waits() {
    let mut q = FairQueue::new();
    q.set_weight("a", Weight::new(1));
    q.set_weight("b", Weight::new(1));
    q.push("a", "k".to_owned(), 0, 0);
    // Alone, `a` served outside the queue owes nothing for it.
    q.charge(&"a", 100);
    for i in 1..20u32 {
        q.push("a", "k".to_owned(), 0, i);
        q.push("b", "k".to_owned(), 1, i);
    }
    assert_eq!(q.pop().unwrap().0, "a", "its head is due first");
    // Now `b` waits: three services `a` got elsewhere put `b` first for three picks.
    q.charge(&"a", 3);
    let next: Vec<&str> = (0..5).map(|_| q.pop().unwrap().0).collect();
    assert_eq!(next, ["b", "b", "b", "b", "a"]);
}
