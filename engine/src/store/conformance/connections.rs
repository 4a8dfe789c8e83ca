//! Connections and tenants' data keys: a tenant's own, written from the revision they were read
//! at, each edit bumping the tenant's definitions version; a tenant's first data key kept once.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::support::ns;
use crate::model::{ConnectionKind, ConnectionName};
use crate::store::{ConnectionPut, Store, StoreError, StoredConnection, TenantKey};

fn stripe() -> ConnectionName {
    ConnectionName::parse("stripe").expect("name")
}

fn connection(tenant: &str, name: &str, revision: i64, at: i64) -> StoredConnection {
    StoredConnection {
        tenant: ns(tenant),
        name: ConnectionName::parse(name).expect("name"),
        kind: ConnectionKind::Http,
        base_url: Some("https://api.example.com/v1/".into()),
        headers: BTreeMap::from([("Accept".into(), "application/json".into())]),
        secret_set_at: BTreeMap::from([("Authorization".into(), at)]),
        sealed: vec![1, 2, 3, 0, 255],
        revision,
        created_at: at,
        updated_at: at,
    }
}

/// A tenant sees only its connections; a write from a stale revision stores nothing; each
/// create, change and delete bumps the tenant's definitions version; the sealed bytes come back
/// as they went in.
pub async fn connections_are_their_tenants_and_written_from_their_revision(store: Arc<dyn Store>) {
    let (acme, globex) = (ns("acme"), ns("globex"));
    assert!(!store.any_connections().await.expect("any"));
    let put = store
        .put_connection(&connection("acme", "stripe", 0, 10), 5)
        .await
        .expect("create");
    assert_eq!(
        put,
        ConnectionPut::Stored {
            created: true,
            version: 1
        }
    );
    assert!(store.any_connections().await.expect("any"));
    let stored = store
        .connection(&acme, &stripe())
        .await
        .expect("read")
        .expect("there");
    assert_eq!(
        stored,
        StoredConnection {
            revision: 1,
            ..connection("acme", "stripe", 0, 10)
        }
    );
    assert_eq!(
        store
            .put_connection(&connection("acme", "stripe", 0, 20), 5)
            .await
            .expect("a second create"),
        ConnectionPut::Stale,
        "a create finds one there"
    );
    let mut changed = connection("acme", "stripe", 1, 30);
    changed.sealed = vec![9; 40];
    changed.created_at = 10;
    assert_eq!(
        store.put_connection(&changed, 5).await.expect("change"),
        ConnectionPut::Stored {
            created: false,
            version: 2
        }
    );
    assert_eq!(
        store
            .put_connection(&changed, 5)
            .await
            .expect("stale change"),
        ConnectionPut::Stale,
        "revision 1 was written over"
    );
    let read = store.connections(&acme).await.expect("list");
    assert_eq!(read.len(), 1);
    assert_eq!(
        (read[0].revision, &read[0].sealed[..], read[0].created_at),
        (2, &[9u8; 40][..], 10)
    );
    assert!(store.connections(&globex).await.expect("list").is_empty());
    assert!(
        store
            .connection(&globex, &stripe())
            .await
            .expect("read")
            .is_none()
    );
    assert_eq!(
        store
            .delete_connection(&globex, &stripe())
            .await
            .expect("delete another's"),
        None
    );
    assert_eq!(
        store
            .delete_connection(&acme, &stripe())
            .await
            .expect("delete"),
        Some(3)
    );
    assert!(store.connections(&acme).await.expect("list").is_empty());
}

/// Creating one more connection than allowed is refused; changing one is not.
pub async fn a_tenant_holds_at_most_its_allowed_connections(store: Arc<dyn Store>) {
    for name in ["a", "b"] {
        store
            .put_connection(&connection("acme", name, 0, 1), 2)
            .await
            .expect("within");
    }
    let refused = store
        .put_connection(&connection("acme", "c", 0, 1), 2)
        .await
        .expect_err("past the ceiling");
    assert!(
        matches!(refused, StoreError::Refused(ref m) if m.contains("max_connections")),
        "{refused}"
    );
    store
        .put_connection(&connection("acme", "a", 1, 2), 2)
        .await
        .expect("a change needs no room");
    store
        .put_connection(&connection("globex", "c", 0, 1), 2)
        .await
        .expect("another tenant's count");
}

/// A tenant's first data key is kept once, whoever creates it; a rewrap replaces it only from
/// the master key it names.
pub async fn a_tenants_data_key_is_created_once_and_rewrapped_from_its_master_key(
    store: Arc<dyn Store>,
) {
    let acme = ns("acme");
    assert_eq!(store.tenant_key(&acme).await.expect("read"), None);
    let first = TenantKey {
        tenant: acme.clone(),
        master_key_id: "k1".into(),
        wrapped: vec![1; 61],
    };
    assert_eq!(
        store.create_tenant_key(&first).await.expect("create"),
        first
    );
    let late = TenantKey {
        wrapped: vec![2; 61],
        ..first.clone()
    };
    assert_eq!(
        store.create_tenant_key(&late).await.expect("create again"),
        first,
        "the first key stays"
    );
    let rewrapped = TenantKey {
        master_key_id: "k2".into(),
        wrapped: vec![3; 61],
        ..first.clone()
    };
    assert!(
        !store
            .rewrap_tenant_key(&rewrapped, "k0")
            .await
            .expect("wrong key")
    );
    assert!(
        store
            .rewrap_tenant_key(&rewrapped, "k1")
            .await
            .expect("rewrap")
    );
    assert!(
        !store
            .rewrap_tenant_key(&rewrapped, "k1")
            .await
            .expect("twice")
    );
    store
        .create_tenant_key(&TenantKey {
            tenant: ns("globex"),
            master_key_id: "k1".into(),
            wrapped: vec![4; 61],
        })
        .await
        .expect("globex");
    let keys = store.tenant_keys().await.expect("all");
    assert_eq!(keys.len(), 2);
    assert_eq!(keys[0], rewrapped);
    assert_eq!(
        store.tenant_key(&acme).await.expect("read"),
        Some(rewrapped)
    );
}
