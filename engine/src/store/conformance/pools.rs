//! Pools: a tenant's own, each edit bumping its definitions version, at most as many as allowed.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::support::ns;
use crate::model::{Namespace, Pool, PoolName, RoutingRules};
use crate::store::{Store, StoreError};

fn pool(tenant: &str, name: &str, labels: &[(&str, &str)], at: i64) -> Pool {
    Pool {
        tenant: ns(tenant),
        name: PoolName::parse(name).expect("pool"),
        labels: labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect::<BTreeMap<_, _>>(),
        created_at: at,
        updated_at: at,
        shared: false,
    }
}

/// A tenant sees only its own pools; each create, change and delete bumps its definitions
/// version (another tenant's stays), and a change keeps when the pool was created.
pub async fn pools_are_their_tenants_and_each_edit_bumps_its_version(store: Arc<dyn Store>) {
    let acme = ns("acme");
    assert_eq!(store.definitions_version(&acme).await.expect("version"), 0);
    let first = store
        .put_pool(&pool("acme", "gpu", &[("region", "eu")], 10), 10)
        .await
        .expect("put");
    assert!(first.created);
    assert_eq!(first.version, 1);
    let changed = store
        .put_pool(&pool("acme", "gpu", &[("region", "us")], 20), 10)
        .await
        .expect("put again");
    assert!(!changed.created);
    assert_eq!(changed.version, 2);
    assert_eq!(changed.pool.created_at, 10, "created when it was first");
    assert_eq!(changed.pool.updated_at, 20);
    store
        .put_pool(&pool("globex", "gpu", &[], 30), 10)
        .await
        .expect("another tenant's");
    store
        .put_pool(&pool("acme", "cpu", &[], 40), 10)
        .await
        .expect("a second");
    let pools = store.pools(&acme).await.expect("list");
    let names: Vec<&str> = pools.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["cpu", "gpu"]);
    assert!(pools.iter().all(|p| p.tenant == acme));
    assert_eq!(
        pools[1].labels.get("region").map(String::as_str),
        Some("us")
    );
    let gpu = PoolName::parse("gpu").expect("pool");
    assert_eq!(
        store.delete_pool(&acme, &gpu).await.expect("delete"),
        Some(4)
    );
    assert_eq!(store.delete_pool(&acme, &gpu).await.expect("again"), None);
    assert_eq!(store.definitions_version(&acme).await.expect("version"), 4);
    assert_eq!(
        store
            .definitions_version(&ns("globex"))
            .await
            .expect("version"),
        1
    );
    assert_eq!(
        store.pools(&ns("globex")).await.expect("list").len(),
        1,
        "acme's delete left globex's pool of the same name"
    );
    assert!(
        store
            .pools(&Namespace::default_ns())
            .await
            .expect("list")
            .is_empty()
    );
}

/// A tenant holds at most the pools it is allowed; changing one it has is never refused.
pub async fn a_tenant_holds_at_most_its_allowed_pools(store: Arc<dyn Store>) {
    for name in ["a", "b"] {
        store
            .put_pool(&pool("acme", name, &[], 1), 2)
            .await
            .expect("within the limit");
    }
    let refused = store.put_pool(&pool("acme", "c", &[], 1), 2).await;
    assert!(
        matches!(&refused, Err(StoreError::Refused(why)) if why.contains("max_pools")),
        "{refused:?}"
    );
    store
        .put_pool(&pool("acme", "a", &[("k", "v")], 2), 2)
        .await
        .expect("a change is not a new pool");
    store
        .put_pool(&pool("globex", "c", &[], 1), 2)
        .await
        .expect("another tenant has its own count");
    assert_eq!(store.pools(&ns("acme")).await.expect("list").len(), 2);
}

/// A tenant's routing rules come back as they were put, another tenant's are its own, and each
/// put bumps the definitions version pools share.
pub async fn routing_rules_are_their_tenants_and_bump_its_version(store: Arc<dyn Store>) {
    let acme = ns("acme");
    assert_eq!(store.routing_rules(&acme).await.expect("read"), None);
    let rules: RoutingRules = serde_json::from_value(serde_json::json!({"rules": [
        {"match": {"step": "blur"}, "pool": "gpu", "fallback": ["cpu"], "priority": 3},
        {"match": {}, "pool": "default"},
    ]}))
    .expect("rules");
    store
        .put_pool(&pool("acme", "gpu", &[], 1), 10)
        .await
        .expect("pool");
    assert_eq!(
        store
            .put_routing_rules(&acme, &rules, 2)
            .await
            .expect("put"),
        2
    );
    assert_eq!(
        store.routing_rules(&acme).await.expect("read").as_ref(),
        Some(&rules)
    );
    assert_eq!(
        store.routing_rules(&ns("globex")).await.expect("read"),
        None
    );
    let only_default: RoutingRules = serde_json::from_value(serde_json::json!({"rules": [
        {"match": {}, "pool": "default"},
    ]}))
    .expect("rules");
    assert_eq!(
        store
            .put_routing_rules(&acme, &only_default, 3)
            .await
            .expect("replace"),
        3
    );
    assert_eq!(
        store.routing_rules(&acme).await.expect("read"),
        Some(only_default)
    );
    assert_eq!(
        store.definitions_version(&ns("globex")).await.expect("v"),
        0
    );
}
