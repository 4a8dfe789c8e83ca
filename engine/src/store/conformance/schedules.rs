//! Schedules: kept per tenant, written only from the revision read, claimed by due time once
//! per claim window however many control planes claim at once.

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::json;

use super::support::ns;
use crate::model::{Cadence, Interval, Overlap, Schedule, ScheduleId, ScheduleSpec, Scope};
use crate::store::{ScheduleRow, Store, StoreError};

fn row(tenant: &str, id: &str, due_at: Option<i64>) -> ScheduleRow {
    ScheduleRow {
        schedule: Schedule {
            id: ScheduleId::parse(id).expect("an id"),
            namespace: ns(tenant),
            spec: ScheduleSpec {
                workflow: "report".into(),
                input: json!({"tenant": tenant}),
                cadence: Cadence::Every(Interval::from_millis(60_000)),
                timezone: "UTC".into(),
                overlap: Overlap::Skip,
                catchup_window: ScheduleSpec::DEFAULT_CATCHUP,
                jitter: Interval::default(),
                paused: false,
            },
            next_tick: due_at,
            buffered: None,
            last_run: None,
            last: None,
            missed: 0,
            key: "k".into(),
            created_at: 1,
            updated_at: 1,
        },
        due_at,
        revision: 0,
    }
}

fn sid(id: &str) -> ScheduleId {
    ScheduleId::parse(id).expect("an id")
}

/// A schedule reads back whole under its tenant only; one id per tenant, two tenants may share
/// it; a tenant's count is capped; a write from a stale revision is refused; a delete reaches
/// only its own tenant's.
pub async fn schedules_are_kept_per_tenant_and_written_from_their_revision(store: Arc<dyn Store>) {
    let nightly = row("acme", "nightly", Some(1_000));
    store.create_schedule(&nightly, 10).await.expect("create");
    let dup = store.create_schedule(&nightly, 10).await;
    assert!(matches!(dup, Err(StoreError::Conflict(_))), "{dup:?}");
    store
        .create_schedule(&row("globex", "nightly", Some(2_000)), 10)
        .await
        .expect("another tenant may use the id");
    let over = store.create_schedule(&row("acme", "second", None), 1).await;
    assert!(matches!(over, Err(StoreError::Refused(_))), "{over:?}");

    let read = store
        .schedule(&ns("acme"), &sid("nightly"))
        .await
        .expect("read")
        .expect("found");
    assert_eq!(read, nightly);
    assert!(
        store
            .schedule(&ns("initech"), &sid("nightly"))
            .await
            .expect("read")
            .is_none()
    );
    let acme_only = store
        .schedules(&Scope::Only(ns("acme")), None, 100)
        .await
        .expect("list");
    assert_eq!(acme_only, vec![nightly.clone()]);
    let all = store.schedules(&Scope::All, None, 1).await.expect("list");
    assert_eq!(all.len(), 1);
    let next = store
        .schedules(
            &Scope::All,
            Some((all[0].schedule.namespace.as_str(), &all[0].schedule.id)),
            10,
        )
        .await
        .expect("page two");
    assert_eq!(next.len(), 1);
    assert_ne!(next[0].schedule.namespace, all[0].schedule.namespace);

    let mut changed = read.clone();
    changed.schedule.spec.paused = true;
    changed.due_at = None;
    assert!(store.save_schedule(&changed).await.expect("save"));
    assert!(
        !store.save_schedule(&changed).await.expect("save"),
        "a second write from the same revision is refused"
    );
    let saved = store
        .schedule(&ns("acme"), &sid("nightly"))
        .await
        .expect("read")
        .expect("found");
    assert!(saved.schedule.spec.paused);
    assert_eq!(saved.due_at, None);
    assert_eq!(saved.revision, 1);

    assert!(
        !store
            .delete_schedule(&ns("initech"), &sid("nightly"))
            .await
            .expect("delete")
    );
    assert!(
        store
            .delete_schedule(&ns("acme"), &sid("nightly"))
            .await
            .expect("delete")
    );
    assert!(
        store
            .schedule(&ns("globex"), &sid("nightly"))
            .await
            .expect("read")
            .is_some(),
        "the other tenant's schedule of that id stays"
    );
}

/// Only due, unpaused schedules in scope are claimed, earliest first; a claim moves them to
/// its end, so racing claims take each schedule once; the earliest due time is reported.
pub async fn due_schedules_are_claimed_once_per_claim(store: Arc<dyn Store>) {
    for i in 0..40 {
        let tenant = if i % 2 == 0 { "acme" } else { "globex" };
        store
            .create_schedule(&row(tenant, &format!("s{i:02}"), Some(100 + i)), 100)
            .await
            .expect("create");
    }
    store
        .create_schedule(&row("acme", "later", Some(10_000)), 100)
        .await
        .expect("create");
    store
        .create_schedule(&row("acme", "paused", None), 100)
        .await
        .expect("create");
    assert_eq!(
        store.next_schedule_due(&Scope::All).await.expect("due"),
        Some(100)
    );
    assert_eq!(
        store
            .next_schedule_due(&Scope::Only(ns("globex")))
            .await
            .expect("due"),
        Some(101)
    );

    let scoped = store
        .claim_schedules(&Scope::Only(ns("globex")), 1_000, 5_000, 3)
        .await
        .expect("claim");
    let ids: Vec<&str> = scoped.iter().map(|r| r.schedule.id.as_str()).collect();
    assert_eq!(ids, ["s01", "s03", "s05"], "earliest first, in scope only");
    assert!(
        scoped
            .iter()
            .all(|r| r.due_at == Some(5_000) && r.revision == 1)
    );

    let racing = (0..4).map(|_| {
        let store = store.clone();
        tokio::spawn(async move {
            store
                .claim_schedules(&Scope::All, 1_000, 5_000, 10)
                .await
                .expect("claim")
        })
    });
    let mut seen = HashSet::new();
    for claim in racing {
        for row in claim.await.expect("claim task") {
            let key = (row.schedule.namespace.clone(), row.schedule.id.clone());
            assert!(seen.insert(key), "claimed twice: {}", row.schedule.id);
        }
    }
    assert_eq!(
        seen.len(),
        37,
        "every due schedule once; not `later`, not `paused`"
    );
    assert!(
        store
            .claim_schedules(&Scope::All, 1_000, 5_000, 10)
            .await
            .expect("claim")
            .is_empty()
    );
    let lapsed = store
        .claim_schedules(&Scope::All, 5_000, 9_000, 100)
        .await
        .expect("claim");
    assert_eq!(lapsed.len(), 40, "claims that lapsed are claimable again");
}
