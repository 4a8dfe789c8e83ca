//! A store-less worker reads its tenant's connections from the control plane: with the
//! tenant's wire token, sealed to a one-time key of each request, so nothing on the Redis (no
//! key, no published message) ever holds a secret; for its token's tenant only.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use durable::StartRun;
use durable::gateway::{RemoteConnections, RunRequestResponder, TokenSigner};
use durable::model::{ConnectionKind, ConnectionName, ConnectionSpec, RunStatus};
use durable::prelude::*;
use durable::runtime::{ConnectionSource, SystemClock, Worker, WorkerConfig};
use durable::secrets::{MasterKey, MasterKeys};
use durable::transport::Partitions;
use durable::transport::redis_testing::fresh_transport;
use futures::StreamExt;
use redis::AsyncCommands;
use serde_json::{Value, json};

use crate::common::wait_for;
use crate::harness::*;

const SECRET: &str = "sk_live_remote_5151515151";

fn vault() -> ConnectionSpec {
    ConnectionSpec {
        kind: ConnectionKind::Secret,
        base_url: None,
        headers: BTreeMap::new(),
        secret_headers: BTreeMap::new(),
        values: BTreeMap::from([("api_key".to_owned(), Some(SECRET.to_owned()))]),
    }
}

fn name(raw: &str) -> ConnectionName {
    ConnectionName::parse(raw).expect("a connection name")
}

/// The control plane's registry: workflow `conn.read` runs step `reader`, which only the
/// worker registers ([`reader`]).
fn workflows() -> Registry {
    let mut registry = Registry::new();
    registry.workflow(
        "conn.read",
        1,
        |ctx: WorkflowContext, input: Value| async move {
            let echoed: Value = ctx.step("reader", &input).await?;
            Ok::<_, WorkflowError>(echoed)
        },
    );
    registry
}

/// Step `reader`: reads connection `vault` and echoes its key (redacted on the way).
fn reader() -> Registry {
    let mut registry = Registry::new();
    registry.step("reader", |ctx: StepContext, _: Value| async move {
        let connection = ctx.connection("vault").await?;
        let key = connection.secret("api_key").unwrap_or_default().to_owned();
        Ok::<_, StepError>(json!({"echo": format!("key={key}"), "length": key.len()}))
    });
    registry
}

/// Every value the Redis holds under `prefix`, as text (strings, lists, hashes, sets, sorted
/// sets and streams).
async fn everything_under(prefix: &str) -> String {
    let mut redis = raw_redis().await;
    let keys: Vec<String> = redis.keys(format!("{prefix}*")).await.expect("keys");
    let mut all = String::new();
    for key in keys {
        let kind: String = redis::cmd("TYPE")
            .arg(&key)
            .query_async(&mut redis)
            .await
            .expect("type");
        let value: redis::Value = match kind.as_str() {
            "string" => redis.get(&key).await,
            "list" => redis.lrange(&key, 0, -1).await,
            "hash" => redis.hgetall(&key).await,
            "set" => redis.smembers(&key).await,
            "zset" => redis.zrange(&key, 0, -1).await,
            "stream" => {
                redis::cmd("XRANGE")
                    .arg(&key)
                    .arg("-")
                    .arg("+")
                    .query_async(&mut redis)
                    .await
            }
            _ => Ok(redis::Value::Nil),
        }
        .expect("read");
        all.push_str(&format!("{key} {value:?}\n"));
    }
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_less_worker_reads_its_tenants_connection_sealed_from_the_control_plane() {
    let Some(transport) = fresh_transport().await else {
        return;
    };
    let prefix = transport.prefix().to_owned();
    // Every message published on the prefix's channels while the test runs.
    let heard = Arc::new(Mutex::new(Vec::<String>::new()));
    let mut pubsub = redis::Client::open(durable::transport::redis_testing::test_url())
        .expect("url")
        .get_async_pubsub()
        .await
        .expect("pubsub");
    pubsub
        .psubscribe(format!("{prefix}*"))
        .await
        .expect("psubscribe");
    let listening = heard.clone();
    tokio::spawn(async move {
        let mut messages = pubsub.into_on_message();
        while let Some(message) = messages.next().await {
            let payload: String = message.get_payload().unwrap_or_default();
            listening.lock().expect("lock").push(payload);
        }
    });

    let dir = tempfile::tempdir().expect("tmp");
    let store = sqlite(&dir).await;
    let engine = Engine::new(
        store.clone(),
        Arc::new(transport.clone()),
        Arc::new(workflows()),
        EngineConfig {
            master_keys: Some(MasterKeys::new(MasterKey::generate(), None)),
            ..EngineConfig::default()
        },
    );
    engine.start().await.expect("engine");
    let signer = TokenSigner::new(vec![9u8; 32]).expect("signer");
    let responder = RunRequestResponder::new(engine.clone(), signer.clone());
    tokio::spawn(responder.serve());
    engine
        .put_connection(&ns("acme"), name("vault"), vault())
        .await
        .expect("put");

    // acme's worker, elsewhere: its own connection to the Redis, no store, acme's token.
    let remote: Arc<dyn durable::transport::Transport> = Arc::new(same_prefix(&transport).await);
    let connections = RemoteConnections::connect(remote.clone(), signer.sign(&ns("acme")))
        .await
        .expect("connections");
    let worker = Worker::start(
        Arc::new(reader()),
        remote.clone(),
        Arc::new(SystemClock),
        WorkerConfig {
            partitions: Partitions::Only(vec![ns("acme").into()]),
            concurrency: 4,
            connections: Some(connections.clone()),
        },
    )
    .await
    .expect("worker");

    let run = engine
        .start_run(StartRun {
            workflow: "conn.read".into(),
            input: json!({}),
            namespace: Some(ns("acme")),
            ..StartRun::default()
        })
        .await
        .expect("start");
    let done = wait_for(&store, &run.id, RunStatus::Completed).await;
    assert_eq!(
        done.output,
        Some(json!({"echo": "key=[redacted]", "length": SECRET.len()})),
        "the secret reached the step, and its echo was kept redacted"
    );

    // The door answers a token's own tenant only, and a forged token nothing.
    let refused = |result: Result<durable::model::Connection, durable::model::StepFailure>| {
        let failure = result.expect_err("refused");
        assert_eq!(failure.retryable, Some(false), "{failure:?}");
        failure.code.unwrap_or_default()
    };
    assert_eq!(
        refused(connections.connection(&ns("globex"), &name("vault")).await),
        "connections_unavailable"
    );
    let globex = RemoteConnections::connect(remote.clone(), signer.sign(&ns("globex")))
        .await
        .expect("globex");
    assert_eq!(
        refused(globex.connection(&ns("globex"), &name("vault")).await),
        "unknown_connection",
        "globex's token does not open acme's connection"
    );
    let forged = RemoteConnections::connect(remote.clone(), "acme.Zm9yZ2Vk")
        .await
        .expect("forged");
    assert_eq!(
        refused(forged.connection(&ns("acme"), &name("vault")).await),
        "unauthorized"
    );

    // Steps that miss together ask once: 32 reads on a fresh worker's connections, one reply.
    let sealed = |heard: &Mutex<Vec<String>>| {
        heard
            .lock()
            .expect("lock")
            .iter()
            .filter(|m| m.contains("\"sealed\""))
            .count()
    };
    let before = sealed(&heard);
    let fresh = RemoteConnections::connect(remote.clone(), signer.sign(&ns("acme")))
        .await
        .expect("fresh");
    let (acme, vault) = (ns("acme"), name("vault"));
    let reads = futures::future::join_all((0..32).map(|_| fresh.connection(&acme, &vault))).await;
    assert!(reads.iter().all(|r| {
        r.as_ref()
            .is_ok_and(|c| c.secret("api_key") == Some(SECRET))
    }));
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(sealed(&heard), before + 1, "one ask for 32 reads");

    // The sealed reply went over the shared reply channel; no message and no key holds the
    // secret.
    let heard = heard.lock().expect("lock").clone();
    assert!(
        heard.iter().any(|m| m.contains("\"sealed\"")),
        "the reply was heard on the channel: {heard:?}"
    );
    assert!(
        heard.iter().all(|m| !m.contains(SECRET)),
        "a published message holds the secret"
    );
    let kept = everything_under(&prefix).await;
    assert!(!kept.is_empty());
    assert!(!kept.contains(SECRET), "a Redis key holds the secret");

    worker.shutdown().await;
    engine.shutdown().await;
}
