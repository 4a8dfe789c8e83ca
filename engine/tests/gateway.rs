//! The isolation boundary over the wire: a control plane's run-request responder answering
//! requests sent through the transport (in-process, and a real Redis), each test trying to cross
//! the line between tenants and checking that nothing changed.

mod common;

use std::sync::Arc;
use std::time::Duration;

use durable::StartRun;
use durable::gateway::{ProxyGateway, RunGateway, RunRequestResponder, StoreGateway, TokenSigner};
use durable::model::{Namespace, RunReply, RunStatus, Scope};
use durable::prelude::*;
use durable::store::{SqliteStore, Store};
use durable::transport::{MemoryTransport, Subscription, Transport};
use futures::StreamExt;
use serde_json::{Value, json};

fn ns(s: &str) -> Namespace {
    Namespace::parse(s).expect("namespace")
}

struct Pod {
    transport: Arc<dyn Transport>,
    replies: Subscription<RunReply>,
    next_id: u32,
}

impl Pod {
    /// Sends `body` with `tenant` (a token, or anything a forger puts there) and waits for the
    /// reply to it.
    async fn ask(&mut self, tenant: &str, body: Value) -> RunReply {
        self.next_id += 1;
        let request_id = format!("req-{}", self.next_id);
        let request = json!({ "requestId": request_id, "tenant": tenant, "body": body });
        self.transport
            .send_run_request(request.to_string())
            .await
            .expect("send");
        self.reply_to(&request_id).await
    }

    async fn reply_to(&mut self, request_id: &str) -> RunReply {
        loop {
            let reply = tokio::time::timeout(Duration::from_secs(10), self.replies.next())
                .await
                .expect("a reply within 10 s")
                .expect("the reply stream is open");
            if reply.request_id == request_id {
                return reply;
            }
        }
    }
}

/// A control plane on a fresh SQLite store and `transport`, with an `approval` workflow (one
/// signal wait) and its responder serving; the temporary directory must outlive the store.
async fn control_plane(
    transport: Arc<dyn Transport>,
) -> (tempfile::TempDir, Arc<dyn Store>, Engine, TokenSigner) {
    let dir = tempfile::tempdir().expect("tmp");
    let store: Arc<dyn Store> = Arc::new(
        SqliteStore::connect(&format!("sqlite://{}/t.db", dir.path().display()))
            .await
            .expect("store"),
    );
    let mut registry = Registry::new();
    registry.workflow("approval", 1, |ctx: WorkflowContext, _: Value| async move {
        let got: Option<Value> = ctx.wait_signal("approve", None).await?;
        Ok::<_, WorkflowError>(json!({ "approved": got }))
    });
    let engine = Engine::new(
        store.clone(),
        transport.clone(),
        Arc::new(registry),
        EngineConfig::default(),
    );
    engine.start().await.expect("engine");
    let signer = TokenSigner::new(vec![42u8; 32]).expect("signer");
    tokio::spawn(RunRequestResponder::new(engine.clone(), signer.clone()).serve());
    (dir, store, engine, signer)
}

async fn boundary(transport: Arc<dyn Transport>) {
    let (_dir, store, engine, signer) = control_plane(transport.clone()).await;
    let acme = signer.sign(&ns("acme"));
    let start = |tenant: &str| StartRun {
        workflow: "approval".into(),
        input: json!({}),
        namespace: Some(ns(tenant)),
        ..StartRun::default()
    };
    let globex_run = engine.start_run(start("globex")).await.expect("start");
    let acme_run = engine.start_run(start("acme")).await.expect("start");
    common::wait_for(&store, &globex_run.id, RunStatus::Suspended).await;
    common::wait_for(&store, &acme_run.id, RunStatus::Suspended).await;
    let before = store
        .get_run(&Scope::All, &globex_run.id)
        .await
        .expect("get")
        .expect("exists");

    let mut pod = Pod {
        replies: transport.subscribe_run_replies().await.expect("replies"),
        transport: transport.clone(),
        next_id: 0,
    };

    // A forged token, a token signed with another secret, and none at all.
    let other_secret = TokenSigner::new(vec![7u8; 32])
        .expect("signer")
        .sign(&ns("acme"));
    for tenant in ["acme", "acme.AAAA", other_secret.as_str(), ""] {
        let reply = pod.ask(tenant, json!({ "kind": "listRuns" })).await;
        assert_eq!(reply.code(), Some("unauthorized"), "{tenant:?}: {reply:?}");
    }

    // acme asking for globex's run by every run-id verb: cross-tenant, before anything happens.
    let id = globex_run.id.to_string();
    for body in [
        json!({ "kind": "getRun", "runId": id }),
        json!({ "kind": "getRunDetail", "runId": id }),
        json!({ "kind": "getCheckpoints", "runId": id }),
        json!({ "kind": "getSearchAttributes", "runId": id }),
        json!({ "kind": "getRunChildren", "runId": id }),
        json!({ "kind": "signal", "runId": id, "signal": "approve", "payload": { "by": "acme" } }),
        json!({ "kind": "cancel", "runId": id }),
        json!({ "kind": "cancel", "runId": id, "opts": { "compensate": true } }),
        json!({ "kind": "retry", "runId": id }),
        json!({ "kind": "continue", "runId": id }),
        json!({ "kind": "retryWithInput", "runId": id, "input": { "x": 1 } }),
        json!({ "kind": "redispatch", "runId": id }),
    ] {
        let reply = pod.ask(&acme, body.clone()).await;
        assert_eq!(reply.code(), Some("cross-tenant"), "{body}: {reply:?}");
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let after = store
        .get_run(&Scope::All, &globex_run.id)
        .await
        .expect("get")
        .expect("exists");
    assert_eq!(after, before, "globex's run is untouched");
    assert!(
        store
            .buffered_signals(&globex_run.id)
            .await
            .expect("signals")
            .is_empty(),
        "no signal was buffered for globex's run"
    );

    // Listing with globex's namespace in the query still lists acme's runs only.
    let reply = pod
        .ask(
            &acme,
            json!({ "kind": "listRuns", "query": { "namespace": "globex" } }),
        )
        .await;
    let runs = reply.result.data.expect("data");
    let ids: Vec<&str> = runs
        .as_array()
        .expect("a list")
        .iter()
        .filter_map(|r| r["id"].as_str())
        .collect();
    assert_eq!(ids, [acme_run.id.as_str()]);

    // A start claiming globex, in the body, is stamped acme.
    let reply = pod
        .ask(
            &acme,
            json!({ "kind": "start", "workflow": "approval", "tenant": "globex", "namespace": "globex", "input": {} }),
        )
        .await;
    let started = reply.result.data.expect("data")["runId"]
        .as_str()
        .expect("runId")
        .to_owned();
    let run = store
        .get_run(
            &Scope::All,
            &durable::model::RunId::parse(&started).expect("id"),
        )
        .await
        .expect("get")
        .expect("exists");
    assert_eq!(run.namespace, ns("acme"));

    // A cancel with compensation (wire §4.2 `cancel (runId, opts:{compensate})`) compensates
    // the tenant's own run instead of only cancelling it.
    common::wait_for(&store, &run.id, RunStatus::Suspended).await;
    let reply = pod
        .ask(
            &acme,
            json!({ "kind": "cancel", "runId": started, "opts": { "compensate": true } }),
        )
        .await;
    assert!(reply.result.ok, "{reply:?}");
    common::wait_for(&store, &run.id, RunStatus::Compensated).await;

    // Unknown verbs, and requests that are not even JSON, get an error or are dropped; the
    // responder keeps answering.
    let reply = pod.ask(&acme, json!({ "kind": "frobnicate" })).await;
    assert_eq!(reply.code(), Some("unknown-verb"));
    assert_eq!(
        reply.result.error.expect("error").message,
        "unknown run-request verb: frobnicate"
    );
    transport
        .send_run_request("{not json".into())
        .await
        .expect("send");
    transport
        .send_run_request(json!({ "tenant": acme }).to_string())
        .await
        .expect("send");
    let reply = pod
        .ask(
            &acme,
            json!({ "kind": "getRun", "runId": "run_does_not_exist" }),
        )
        .await;
    assert!(reply.result.ok, "{reply:?}");
    assert!(
        reply.result.data.is_none_or(|d| d.is_null()),
        "a missing run is null"
    );

    // The same verbs through both gateways give the same answers: in-process over the store,
    // and as a store-less pod through the responder.
    let direct = StoreGateway::new(engine.clone(), ns("acme"));
    let proxied = ProxyGateway::connect(transport.clone(), acme.clone())
        .await
        .expect("proxy");
    let gateways: [&dyn RunGateway; 2] = [&direct, &proxied];
    let mut answers = Vec::new();
    for gateway in gateways {
        let own = gateway.get_run(&acme_run.id).await.expect("own run");
        let other = gateway
            .get_run(&globex_run.id)
            .await
            .expect_err("globex's run");
        let listed: Vec<String> = gateway
            .list_runs(json!({ "namespace": "globex" }))
            .await
            .expect("list")
            .into_iter()
            .map(|r| r.id.to_string())
            .collect();
        answers.push((own.map(|r| r.id), other.code, listed));
    }
    assert_eq!(answers[0], answers[1]);
    assert_eq!(answers[0].1.as_deref(), Some("cross-tenant"));
    let forged = ProxyGateway::connect(transport.clone(), "acme.forged")
        .await
        .expect("proxy");
    let refused = forged
        .get_run(&acme_run.id)
        .await
        .expect_err("forged token");
    assert_eq!(refused.code.as_deref(), Some("unauthorized"));

    // A fan-out wider than a page of the family is answered whole.
    let wide = durable::model::RunId::parse("run-wide").expect("id");
    store
        .create_run(
            durable::store::NewRun::top_level(wide.clone(), ns("acme"), "approval", 1, json!({})),
            1,
            None,
        )
        .await
        .expect("create");
    let fan_out = durable::model::MAX_PAGE_SIZE as usize + 5;
    for n in 0..fan_out {
        let mut child = durable::store::NewRun::top_level(
            durable::runtime::child_run_id(&wide, n as u32),
            ns("acme"),
            "approval",
            1,
            json!({}),
        );
        child.parent_run_id = Some(wide.clone());
        child.root_run_id = wide.clone();
        child.nesting_depth = 1;
        store.create_run(child, 2, None).await.expect("create");
    }
    let reply = pod
        .ask(&acme, json!({ "kind": "getRunChildren", "runId": wide }))
        .await;
    let listed = reply.result.data.expect("data");
    assert_eq!(
        listed.as_array().map(Vec::len),
        Some(fan_out),
        "every child"
    );

    // A signal name no wait could match, and a list filter the store could not keep, are
    // refused as bad requests (not blamed on the database).
    for body in [
        json!({ "kind": "signal", "runId": acme_run.id, "signal": " approve" }),
        json!({ "kind": "signal", "runId": acme_run.id, "signal": "" }),
        json!({ "kind": "listRuns", "query": { "tag": "a\u{0}" } }),
    ] {
        let reply = pod.ask(&acme, body.clone()).await;
        assert_eq!(reply.code(), Some("bad-request"), "{body}: {reply:?}");
    }

    // Its own run, acme may act on: the signal completes it.
    let reply = pod
        .ask(
            &acme,
            json!({ "kind": "signal", "runId": acme_run.id, "signal": "approve", "payload": { "ok": true } }),
        )
        .await;
    assert!(reply.result.ok, "{reply:?}");
    let done = common::wait_for(&store, &acme_run.id, RunStatus::Completed).await;
    assert_eq!(done.output, Some(json!({ "approved": { "ok": true } })));
    engine.shutdown().await;
}

/// Every run in the store, whatever its tenant.
async fn all_runs(store: &Arc<dyn Store>) -> Vec<durable::model::Run> {
    let page = store
        .list_runs(&Scope::All, &durable::model::RunQuery::default())
        .await
        .expect("list");
    page.runs
}

/// Start-run messages (wire §4.1, what an SDK worker's `start_run` sends) pass the same door:
/// the run is the token's tenant's whatever the message claims, started once however often the
/// message comes, and a message that is refused changes nothing.
async fn start_runs(transport: Arc<dyn Transport>) {
    let (_dir, store, engine, signer) = control_plane(transport.clone()).await;
    let acme = signer.sign(&ns("acme"));
    let globex = signer.sign(&ns("globex"));
    let mut pod = Pod {
        replies: transport.subscribe_run_replies().await.expect("replies"),
        transport: transport.clone(),
        next_id: 0,
    };
    let send = |message: Value| {
        let transport = transport.clone();
        async move {
            transport
                .send_start_run(message.to_string())
                .await
                .expect("send");
        }
    };

    // Garbage first: dropped, and the loop goes on.
    transport
        .send_start_run("{not json".into())
        .await
        .expect("send");
    send(json!(["not", "an", "object"])).await;

    // Started in the token's tenant, whatever the message claims, with its tags and attributes.
    let message = json!({
        "tenant": acme, "namespace": "globex", "workflow": "approval", "input": { "a": 1 },
        "runId": "run-start-1", "tags": ["vip"], "searchAttributes": { "tier": "pro" },
    });
    send(message.clone()).await;
    let reply = pod.reply_to("run-start-1").await;
    assert!(reply.result.ok, "{reply:?}");
    assert_eq!(
        reply.result.data.as_ref().expect("data")["runId"],
        "run-start-1"
    );
    let id = durable::model::RunId::parse("run-start-1").expect("id");
    let run = store
        .get_run(&Scope::All, &id)
        .await
        .expect("get")
        .expect("started");
    assert_eq!(run.namespace, ns("acme"));
    assert_eq!(run.input, json!({ "a": 1 }));
    assert_eq!(run.tags, ["vip"]);
    assert_eq!(run.search_attributes.get("tier"), Some(&json!("pro")));

    // Redelivered: answered with the same run, and no second one.
    send(message.clone()).await;
    let reply = pod.reply_to("run-start-1").await;
    assert!(reply.result.ok, "{reply:?}");
    assert_eq!(
        reply.result.data.as_ref().expect("data")["runId"],
        "run-start-1"
    );

    // Delivered twice at once: both answered with the one run.
    let twice =
        json!({ "tenant": acme, "workflow": "approval", "input": {}, "runId": "run-start-2" });
    send(twice.clone()).await;
    send(twice).await;
    for _ in 0..2 {
        let reply = pod.reply_to("run-start-2").await;
        assert!(reply.result.ok, "{reply:?}");
    }

    // globex reusing acme's run id: refused, acme's run untouched.
    send(json!({ "tenant": globex, "workflow": "approval", "input": {}, "runId": "run-start-1" }))
        .await;
    let reply = pod.reply_to("run-start-1").await;
    assert_eq!(reply.code(), Some("conflict"), "{reply:?}");

    // Forged or missing tokens: unauthorized (answered when there is a runId to answer to).
    for tenant in [json!("acme"), json!("acme.AAAA"), Value::Null] {
        send(
            json!({ "tenant": tenant, "workflow": "approval", "input": {}, "runId": "run-forged" }),
        )
        .await;
        let reply = pod.reply_to("run-forged").await;
        assert_eq!(reply.code(), Some("unauthorized"), "{tenant}: {reply:?}");
    }
    send(json!({ "tenant": "acme", "workflow": "approval", "input": {} })).await;

    // Malformed starts: a clear error, nothing started.
    for (message, says) in [
        (
            json!({ "workflow": "approval", "runId": "run-bad" }),
            "`input`",
        ),
        (json!({ "input": {}, "runId": "run-bad" }), "`workflow`"),
        (
            json!({ "workflow": "approval", "input": {}, "runId": "run-bad", "tags": [1] }),
            "`tags`",
        ),
        (
            json!({ "workflow": "approval", "input": {}, "runId": "run-bad", "searchAttributes": { "a": { "b": 1 } } }),
            "search attribute `a`",
        ),
        (
            json!({ "workflow": "approval", "input": { "k": "a\u{0}b" }, "runId": "run-bad" }),
            "U+0000",
        ),
        (
            json!({ "workflow": "nope", "input": {}, "runId": "run-bad" }),
            "nope",
        ),
        (
            json!({ "workflow": "approval", "input": {}, "runId": "run-start-1.child.0" }),
            "reserves",
        ),
    ] {
        let mut message = message;
        message["tenant"] = json!(acme);
        if let Some(id) = message["runId"].as_str().map(str::to_owned) {
            send(message.clone()).await;
            let reply = pod.reply_to(&id).await;
            let error = reply.result.error.clone().expect("refused");
            assert!(error.message.contains(says), "{message}: {error:?}");
        }
    }

    // A start with no runId: answered under the id it got.
    send(json!({ "tenant": acme, "workflow": "approval", "input": null })).await;
    let mut runs = all_runs(&store).await;
    for _ in 0..100 {
        if runs.len() > 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        runs = all_runs(&store).await;
    }
    assert_eq!(runs.len(), 3, "one run per accepted start: {runs:?}");
    assert!(runs.iter().all(|r| r.namespace == ns("acme")));
    let minted = runs
        .iter()
        .find(|r| !r.id.as_str().starts_with("run-start-"))
        .expect("minted");
    let reply = pod.reply_to(minted.id.as_str()).await;
    assert!(reply.result.ok, "{reply:?}");
    engine.shutdown().await;
}

/// Runs the case `case` (an async fn taking the transport) as two tests: `$in_process` on the
/// in-process transport and `$over_redis` on a fresh Redis prefix.
macro_rules! on_both_transports {
    ($case:ident: $in_process:ident, $over_redis:ident) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $in_process() {
            $case(Arc::new(MemoryTransport::new())).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $over_redis() {
            let Some(transport) = durable::transport::redis_testing::fresh_transport().await else {
                return;
            };
            $case(Arc::new(transport)).await;
        }
    };
}

on_both_transports!(start_runs:
    start_run_messages_pass_the_boundary_on_the_in_process_transport,
    start_run_messages_pass_the_boundary_over_redis);
on_both_transports!(boundary:
    the_boundary_holds_on_the_in_process_transport,
    the_boundary_holds_over_redis);

/// Any message a tenant (or anyone with access to the queues) can put on the run-request and
/// start-run queues, signed for acme or forged: the responder answers or drops it, never
/// panics, and nothing it does lands outside acme.
#[test]
fn any_run_request_or_start_stays_in_its_tokens_tenant() {
    use durable::testing::{hostile_json, hostile_string, wire_object};
    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestRunner};

    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let (_dir, store, engine, signer) =
        runtime.block_on(control_plane(Arc::new(MemoryTransport::new())));
    let responder = RunRequestResponder::new(engine.clone(), signer.clone());
    let acme = signer.sign(&ns("acme"));
    let token = prop_oneof![
        3 => Just(acme),
        1 => hostile_string(),
        1 => Just(signer.sign(&ns("globex")).replace('.', "x")),
    ];
    let body = prop_oneof![
        (
            prop::sample::select(vec![
                "start",
                "getRun",
                "listRuns",
                "signal",
                "cancel",
                "workerHealth",
            ]),
            wire_object(&[
                "workflow",
                "input",
                "runId",
                "signal",
                "payload",
                "query",
                "namespace",
            ]),
        )
            .prop_map(|(kind, mut body)| {
                body["kind"] = json!(kind);
                // Real workflows too, so starts get through and land somewhere.
                if body.get("workflow").is_none() {
                    body["workflow"] = json!("approval");
                }
                body
            }),
        hostile_json(),
    ];
    let message = (token, body, hostile_string()).prop_map(|(tenant, body, id)| {
        json!({ "requestId": id, "runId": id, "tenant": tenant, "body": body,
                "workflow": "approval", "input": body, "namespace": "globex" })
    });
    let raw = prop_oneof![
        4 => message.prop_map(|m| m.to_string()),
        1 => any::<String>(),
    ];
    TestRunner::new(Config {
        cases: 128,
        ..Config::default()
    })
    .run(&raw, |raw| {
        runtime.block_on(async {
            let _ = responder.answer(&raw).await;
            let _ = responder.answer_start(&raw).await;
        });
        Ok(())
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let runs = runtime.block_on(all_runs(&store));
    assert!(!runs.is_empty(), "no message started a run");
    assert!(
        runs.iter().all(|r| r.namespace == ns("acme")),
        "a run outside the signed tenant: {:?}",
        runs.iter().find(|r| r.namespace != ns("acme"))
    );
    runtime.block_on(engine.shutdown());
}
