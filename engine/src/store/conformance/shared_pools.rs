//! Shared pools: put by an operator, granted to tenants (each grant bumping the tenant's
//! definitions version), never granted by the name of a tenant's own pool, deleted only once
//! no tenant holds them.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::support::ns;
use crate::model::{Pool, PoolName, SharedPool};
use crate::store::{Grant, SharedPoolDeleted, Store, StoreError};

fn shared(name: &str, region: &str, at: i64) -> SharedPool {
    SharedPool {
        name: PoolName::parse(name).expect("pool"),
        labels: BTreeMap::from([("region".to_owned(), region.to_owned())]),
        grants: BTreeSet::new(),
        created_at: at,
        updated_at: at,
    }
}

fn name(raw: &str) -> PoolName {
    PoolName::parse(raw).expect("pool")
}

/// A shared pool is granted and revoked per tenant, a grant bumping only that tenant's
/// version; it cannot share its name with a tenant's own pool either way; it is deleted only
/// once no tenant holds it.
pub async fn shared_pools_are_granted_per_tenant_and_deleted_once_ungranted(store: Arc<dyn Store>) {
    let (acme, globex) = (ns("acme"), ns("globex"));
    assert!(
        store
            .put_shared_pool(&shared("gpu", "eu", 10))
            .await
            .expect("put")
    );
    assert!(
        !store
            .put_shared_pool(&shared("gpu", "us", 20))
            .await
            .expect("again")
    );
    assert_eq!(
        store
            .grant_pool(&name("gpu"), &acme, 30)
            .await
            .expect("grant"),
        Grant::Granted { version: 1 }
    );
    assert_eq!(
        store
            .grant_pool(&name("gpu"), &globex, 30)
            .await
            .expect("grant"),
        Grant::Granted { version: 1 }
    );
    assert_eq!(
        store
            .grant_pool(&name("tpu"), &acme, 30)
            .await
            .expect("grant"),
        Grant::NoSuchPool
    );
    let all = store.shared_pools().await.expect("list");
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].labels["region"], "us");
    assert_eq!(all[0].created_at, 10);
    assert_eq!(
        all[0].grants,
        BTreeSet::from([acme.clone(), globex.clone()])
    );
    let granted = store.granted_pools(&acme).await.expect("granted");
    assert_eq!(granted.len(), 1);
    assert_eq!(granted[0].grants, BTreeSet::from([acme.clone()]));
    assert!(
        store
            .granted_pools(&ns("initech"))
            .await
            .expect("none")
            .is_empty()
    );

    // A tenant's own pool and a granted one cannot share a name.
    let own = Pool {
        tenant: acme.clone(),
        name: name("gpu"),
        labels: BTreeMap::new(),
        created_at: 40,
        updated_at: 40,
        shared: false,
    };
    let refused = store
        .put_pool(&own, 10)
        .await
        .expect_err("the name is granted");
    assert!(
        matches!(refused, StoreError::Refused(ref m) if m.contains("shared pool")),
        "{refused}"
    );
    store
        .put_shared_pool(&shared("cpu", "eu", 50))
        .await
        .expect("put");
    store
        .put_pool(
            &Pool {
                name: name("cpu"),
                ..own.clone()
            },
            10,
        )
        .await
        .expect("acme's own cpu");
    assert_eq!(
        store
            .grant_pool(&name("cpu"), &acme, 60)
            .await
            .expect("grant"),
        Grant::OwnPool
    );

    assert_eq!(
        store
            .delete_shared_pool(&name("gpu"))
            .await
            .expect("delete"),
        SharedPoolDeleted::Granted(vec![acme.clone(), globex.clone()])
    );
    let version = store
        .revoke_pool(&name("gpu"), &acme)
        .await
        .expect("revoke");
    assert!(version.is_some_and(|v| v > 1), "{version:?}");
    assert_eq!(
        store.revoke_pool(&name("gpu"), &acme).await.expect("again"),
        None
    );
    store
        .revoke_pool(&name("gpu"), &globex)
        .await
        .expect("revoke");
    assert_eq!(
        store
            .delete_shared_pool(&name("gpu"))
            .await
            .expect("delete"),
        SharedPoolDeleted::Deleted
    );
    assert_eq!(
        store.delete_shared_pool(&name("gpu")).await.expect("again"),
        SharedPoolDeleted::Missing
    );
}
