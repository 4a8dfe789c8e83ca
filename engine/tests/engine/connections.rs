//! Connections: a step reads its tenant's connection through its context, never through its
//! input; whatever it hands back is kept without the secrets it received; a sealed secret opens
//! only as the tenant's and the connection's it was sealed for; a master key rotation keeps
//! every connection readable.

use std::collections::BTreeMap;

use durable::StartRun;
use durable::model::{
    CheckpointStatus, ConnectionKind, ConnectionName, ConnectionSpec, Namespace, RunStatus, Scope,
};
use durable::prelude::*;
use durable::runtime::Registry;
use durable::secrets::{MasterKey, MasterKeys};
use serde_json::{Value, json};

use crate::backend::Backend;
use crate::common::wait_for;

engine_cases! {
    a_step_reads_its_tenants_connection_and_keeps_none_of_its_secrets,
    a_sealed_secret_copied_to_another_row_does_not_open,
    a_master_key_rotation_keeps_every_connection_readable,
}

const SECRET: &str = "sk_live_4242424242";

/// A registry whose workflow `conn.read` runs step `reader` with its input (`{"connection"}`):
/// the step reads the connection and echoes its `api_key` back, redacted on the way; workflow
/// `conn.leak` runs step `leaker`, which fails with the key in its message.
fn readers() -> Registry {
    let mut registry = Registry::new();
    registry.workflow(
        "conn.read",
        1,
        |ctx: WorkflowContext, input: Value| async move {
            let echoed: Value = ctx.step("reader", &input).await?;
            Ok::<_, WorkflowError>(echoed)
        },
    );
    registry.workflow(
        "conn.leak",
        1,
        |ctx: WorkflowContext, input: Value| async move {
            let _: Value = ctx.step("leaker", &input).await?;
            Ok::<_, WorkflowError>(Value::Null)
        },
    );
    registry.step("reader", |ctx: StepContext, input: Value| async move {
        let name = input["connection"].as_str().unwrap_or_default().to_owned();
        let connection = ctx.connection(&name).await?;
        let key = connection.secret("api_key").unwrap_or_default().to_owned();
        Ok::<_, StepError>(json!({"echo": format!("key={key}"), "length": key.len()}))
    });
    registry.step("leaker", |ctx: StepContext, _: Value| async move {
        let connection = ctx.connection("vault").await?;
        let key = connection.secret("api_key").unwrap_or_default();
        Err::<Value, _>(StepError::fatal(format!(
            "the downstream refused key {key}"
        )))
    });
    registry
}

fn keyed(keys: &MasterKeys) -> EngineConfig {
    EngineConfig {
        master_keys: Some(keys.clone()),
        ..EngineConfig::default()
    }
}

fn vault(secret: &str) -> ConnectionSpec {
    ConnectionSpec {
        kind: ConnectionKind::Secret,
        base_url: None,
        headers: BTreeMap::new(),
        secret_headers: BTreeMap::new(),
        values: BTreeMap::from([("api_key".to_owned(), Some(secret.to_owned()))]),
    }
}

fn tenant(name: &str) -> Namespace {
    Namespace::tenant(name).unwrap()
}

fn name(raw: &str) -> ConnectionName {
    ConnectionName::parse(raw).unwrap()
}

fn start(workflow: &str, ns: &str, connection: &str) -> StartRun {
    StartRun {
        workflow: workflow.into(),
        input: json!({ "connection": connection }),
        namespace: Some(tenant(ns)),
        ..Default::default()
    }
}

/// An engine with `keys` and nothing registered, not started (what a server checks at start,
/// or `durable connection rotate-key` uses).
async fn unstarted(backend: &Backend, keys: Option<MasterKeys>) -> Engine {
    backend.engine(
        backend.store().await,
        backend.transport().await,
        std::sync::Arc::new(Registry::new()),
        EngineConfig {
            master_keys: keys,
            ..EngineConfig::default()
        },
    )
}

/// Everything the store keeps of a run, as text.
async fn kept(h: &crate::harness::Harness, id: &durable::model::RunId) -> String {
    let run = h.store.get_run(&Scope::All, id).await.unwrap();
    let checkpoints = h.store.checkpoints(&Scope::All, id).await.unwrap();
    format!(
        "{}{}",
        serde_json::to_string(&run).unwrap(),
        serde_json::to_string(&checkpoints).unwrap()
    )
}

/// A step of acme's reads acme's connection (its value reaches the step: the length it
/// reports) and echoes the secret, which is kept as `[redacted]`; a failure quoting it is kept
/// redacted too. Nothing the store keeps of either run holds the secret, nor does a read of
/// the connection. The same step in globex, which has no such connection, fails saying so.
async fn a_step_reads_its_tenants_connection_and_keeps_none_of_its_secrets(backend: Backend) {
    let keys = MasterKeys::new(MasterKey::generate(), None);
    let h = backend
        .start_with(backend.store().await, readers(), keyed(&keys))
        .await;
    let saved = h
        .engine
        .put_connection(&tenant("acme"), name("vault"), vault(SECRET))
        .await
        .unwrap();
    assert!(saved.created);
    assert!(saved.connection.secrets.contains_key("api_key"));
    assert!(!format!("{:?}", saved.connection).contains(SECRET));

    let run = h
        .engine
        .start_run(start("conn.read", "acme", "vault"))
        .await
        .unwrap();
    let done = wait_for(&h.store, &run.id, RunStatus::Completed).await;
    assert_eq!(
        done.output,
        Some(json!({"echo": "key=[redacted]", "length": SECRET.len()}))
    );
    assert!(!kept(&h, &run.id).await.contains(SECRET));

    let leak = h
        .engine
        .start_run(start("conn.leak", "acme", "vault"))
        .await
        .unwrap();
    let failed = wait_for(&h.store, &leak.id, RunStatus::Failed).await;
    let error = failed.error.clone().expect("why");
    assert!(
        error.message.contains("refused key [redacted]"),
        "{error:?}"
    );
    assert!(!kept(&h, &leak.id).await.contains(SECRET));
    let listed = h.engine.connections(&tenant("acme")).await.unwrap();
    assert!(!serde_json::to_string(&listed).unwrap().contains(SECRET));

    let other = h
        .engine
        .start_run(start("conn.read", "globex", "vault"))
        .await
        .unwrap();
    wait_for(&h.store, &other.id, RunStatus::Failed).await;
    let cps = h.store.checkpoints(&Scope::All, &other.id).await.unwrap();
    assert_eq!(cps[0].status, CheckpointStatus::Failed);
    assert_eq!(
        cps[0].error.as_ref().and_then(|e| e.code.as_deref()),
        Some("unknown_connection")
    );
    assert!(
        h.engine
            .connections(&tenant("globex"))
            .await
            .unwrap()
            .is_empty()
    );

    // A change of the secret reaches the next step.
    h.engine
        .put_connection(&tenant("acme"), name("vault"), vault("sk_live_shorter"))
        .await
        .unwrap();
    let again = h
        .engine
        .start_run(start("conn.read", "acme", "vault"))
        .await
        .unwrap();
    let done = wait_for(&h.store, &again.id, RunStatus::Completed).await;
    assert_eq!(
        done.output.unwrap()["length"],
        json!("sk_live_shorter".len())
    );
    h.stop().await;
}

/// acme's sealed secrets written into globex's row of the same name, or into another of
/// acme's connections, do not open: each ciphertext is bound to its tenant and connection, and
/// each tenant has its own data key. The step fails without retrying, saying so.
async fn a_sealed_secret_copied_to_another_row_does_not_open(backend: Backend) {
    let keys = MasterKeys::new(MasterKey::generate(), None);
    let h = backend
        .start_with(backend.store().await, readers(), keyed(&keys))
        .await;
    let (acme, globex) = (tenant("acme"), tenant("globex"));
    for (ns, connection, secret) in [
        (&acme, "vault", SECRET),
        (&acme, "other", "sk_test_other_one"),
        (&globex, "vault", "sk_test_globex_1"),
    ] {
        h.engine
            .put_connection(ns, name(connection), vault(secret))
            .await
            .unwrap();
    }
    let stolen = h
        .store
        .connection(&acme, &name("vault"))
        .await
        .unwrap()
        .unwrap();
    for (ns, connection) in [(&globex, "vault"), (&acme, "other")] {
        let mut row = h
            .store
            .connection(ns, &name(connection))
            .await
            .unwrap()
            .unwrap();
        row.sealed = stolen.sealed.clone();
        let put = h.store.put_connection(&row, 50).await.unwrap();
        assert!(matches!(put, durable::store::ConnectionPut::Stored { .. }));
    }
    // This plane wrote the rows behind its engine's back: its copy is renewed by the version.
    for (ns, connection) in [("globex", "vault"), ("acme", "other")] {
        let run = h
            .engine
            .start_run(start("conn.read", ns, connection))
            .await
            .unwrap();
        wait_for(&h.store, &run.id, RunStatus::Failed).await;
        let cps = h.store.checkpoints(&Scope::All, &run.id).await.unwrap();
        let error = cps[0].error.clone().expect("why");
        assert_eq!(
            error.code.as_deref(),
            Some("connection_unreadable"),
            "{error:?}"
        );
        assert_eq!(error.retryable, Some(false));
        assert!(error.message.contains("does not decrypt"), "{error:?}");
    }
    // acme's own row still opens.
    let run = h
        .engine
        .start_run(start("conn.read", "acme", "vault"))
        .await
        .unwrap();
    wait_for(&h.store, &run.id, RunStatus::Completed).await;
    h.stop().await;
}

/// Two tenants' connections made under one master key; a plane holding a new key and the old
/// one as previous rewraps both data keys (a second rotation has nothing left to do); a server
/// with the new key alone then reads them, one with the old key alone, or none, refuses to
/// start, naming what to set.
async fn a_master_key_rotation_keeps_every_connection_readable(backend: Backend) {
    let (old, new) = (MasterKey::generate(), MasterKey::generate());
    let before = MasterKeys::new(old.clone(), None);
    let h = backend
        .start_with(backend.store().await, readers(), keyed(&before))
        .await;
    for ns in ["acme", "globex"] {
        h.engine
            .put_connection(&tenant(ns), name("vault"), vault(SECRET))
            .await
            .unwrap();
    }
    h.stop().await;

    let rotating = unstarted(
        &backend,
        Some(MasterKeys::new(new.clone(), Some(old.clone()))),
    )
    .await;
    rotating.check_master_keys().await.unwrap();
    let rotation = rotating.rotate_master_key().await.unwrap();
    assert_eq!((rotation.rewrapped, rotation.current), (2, 0));
    let rotation = rotating.rotate_master_key().await.unwrap();
    assert_eq!((rotation.rewrapped, rotation.current), (0, 2));

    let refused = unstarted(&backend, Some(before))
        .await
        .check_master_keys()
        .await
        .unwrap_err();
    assert!(
        refused.to_string().contains("DURABLE_MASTER_KEY_PREVIOUS"),
        "{refused}"
    );
    let refused = unstarted(&backend, None)
        .await
        .check_master_keys()
        .await
        .unwrap_err();
    assert!(
        refused.to_string().contains("DURABLE_MASTER_KEY"),
        "{refused}"
    );

    let after = MasterKeys::new(new, None);
    let h = backend
        .start_with(backend.store().await, readers(), keyed(&after))
        .await;
    h.engine.check_master_keys().await.unwrap();
    for ns in ["acme", "globex"] {
        let run = h
            .engine
            .start_run(start("conn.read", ns, "vault"))
            .await
            .unwrap();
        let done = wait_for(&h.store, &run.id, RunStatus::Completed).await;
        assert_eq!(done.output.unwrap()["length"], json!(SECRET.len()));
    }
    h.stop().await;
}
