//! The transport conformance suite: one `pub async fn` per behaviour, each taking a fresh
//! transport. The in-process and the Redis transport both pass it (see
//! [`crate::transport_conformance!`]), so the engine cannot tell them apart.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde_json::json;

use super::{
    DefinitionsNotice, EventDelivery, Partitions, SlotClaim, Subscription, TaskSubscription,
    Transport,
};
use crate::model::{
    ControlMessage, ControlNotice, Namespace, Partition, RemoteTask, RunId, RunStatus, Scope,
    StepOutcome, StepResult, TenantEvent, TenantEventKind,
};
use crate::transport::naming::routing_token;

fn ns(s: &str) -> Namespace {
    Namespace::parse(s).expect("test namespace")
}

fn task(run: &str, name: &str, partition: Option<&Namespace>) -> RemoteTask {
    RemoteTask {
        run_id: RunId::parse(run).expect("id"),
        seq: 0,
        name: name.to_owned(),
        step_id: format!("{run}:0"),
        group: routing_token(name, partition),
        input: Some(json!({ "run": run })),
        context: None,
        traceparent: None,
        attempt: 1,
        reply_to: None,
        priority: None,
        receipt: Default::default(),
    }
}

/// A subscription to step `name` on `partitions`, one task at a time.
fn subscription(name: &str, partitions: Vec<Namespace>) -> TaskSubscription {
    TaskSubscription {
        names: vec![name.into()],
        partitions: Partitions::Only(partitions.into_iter().map(Partition::from).collect()),
        concurrency: 1,
        workflows: Vec::new(),
        capabilities: Vec::new(),
    }
}

fn event(run: &str, namespace: &str) -> TenantEvent {
    TenantEvent {
        kind: TenantEventKind::RunCompleted,
        namespace: ns(namespace),
        run_id: RunId::parse(run).expect("id"),
        workflow: "wf".into(),
        status: RunStatus::Completed,
        seq: None,
        at: 1_795_939_520_882,
    }
}

/// The next item within a few seconds, or `None`.
async fn next<T>(stream: &mut Subscription<T>) -> Option<T> {
    tokio::time::timeout(Duration::from_secs(5), stream.next())
        .await
        .ok()
        .flatten()
}

/// Nothing more within a short while.
async fn quiet<T: std::fmt::Debug>(stream: &mut Subscription<T>) {
    if let Ok(Some(item)) = tokio::time::timeout(Duration::from_millis(400), stream.next()).await {
        panic!("expected nothing more, got {item:?}");
    }
}

/// A task reaches only a worker serving its token's partition, and a result comes back.
pub async fn tasks_reach_only_their_partition(transport: Arc<dyn Transport>) {
    let subscribe = |partition: &str| subscription("charge", vec![ns(partition)]);
    let mut acme = transport
        .consume_tasks(subscribe("acme"))
        .await
        .expect("acme consumer");
    let mut globex = transport
        .consume_tasks(subscribe("globex"))
        .await
        .expect("globex consumer");
    let mut results = transport.consume_results().await.expect("results");
    for t in [
        task("run-a", "charge", Some(&ns("acme"))),
        task("run-g", "charge", Some(&ns("globex"))),
        task("run-bare", "charge", None),
    ] {
        transport.dispatch(t).await.expect("dispatch");
    }
    let got = next(&mut acme).await.expect("acme's task");
    let got = RemoteTask {
        reply_to: None,
        priority: None,
        ..got
    };
    assert_eq!(got, task("run-a", "charge", Some(&ns("acme"))));
    let mut got = next(&mut globex).await.expect("globex's task");
    assert_eq!(got.run_id.as_str(), "run-g");
    // Where the result goes is the transport's business: the task may name it.
    let reply_to = got.reply_to.take();
    quiet(&mut acme).await;
    quiet(&mut globex).await;

    let result = StepResult {
        run_id: got.run_id.clone(),
        seq: 0,
        step_id: got.step_id.clone(),
        started_at: Some(5),
        outcome: StepOutcome::Completed {
            output: json!({ "ok": true }),
        },
        receipt: Default::default(),
    };
    transport
        .publish_result(result.clone(), reply_to.as_deref())
        .await
        .expect("publish result");
    assert_eq!(next(&mut results).await, Some(result));
}

/// A transport that retains its tasks tells the redispatch loop where a try's job is: outstanding
/// while it waits and while a worker holds it, not once the worker sent its result (one that
/// does not retain them is never asked).
pub async fn a_task_is_outstanding_until_its_result_is_sent(transport: Arc<dyn Transport>) {
    if !transport.retains_tasks() {
        return;
    }
    let sent = task("run-o", "charge", Some(&ns("acme")));
    assert!(
        !transport.task_outstanding(&sent).await.expect("look"),
        "not sent yet"
    );
    transport.dispatch(sent.clone()).await.expect("dispatch");
    assert!(
        transport.task_outstanding(&sent).await.expect("look"),
        "waiting"
    );
    let mut worker = transport
        .consume_tasks(subscription("charge", vec![ns("acme")]))
        .await
        .expect("consumer");
    let mut got = next(&mut worker).await.expect("the task");
    assert!(
        transport.task_outstanding(&sent).await.expect("look"),
        "held"
    );
    let next_try = RemoteTask {
        attempt: 2,
        ..sent.clone()
    };
    assert!(
        !transport.task_outstanding(&next_try).await.expect("look"),
        "another try"
    );
    let result = StepResult {
        run_id: got.run_id.clone(),
        seq: 0,
        step_id: got.step_id.clone(),
        started_at: Some(5),
        outcome: StepOutcome::Completed { output: json!(1) },
        receipt: std::mem::take(&mut got.receipt),
    };
    let reply_to = got.reply_to.take();
    transport
        .publish_result(result, reply_to.as_deref())
        .await
        .expect("publish result");
    assert!(
        !transport.task_outstanding(&sent).await.expect("look"),
        "answered"
    );
}

/// A consumer of several tenants' queues does not serve one tenant's backlog first: a task of
/// another tenant queued behind 100 waits for a bounded share of them, not all.
pub async fn a_tenants_backlog_does_not_hold_back_anothers_task(transport: Arc<dyn Transport>) {
    for i in 0..100 {
        let t = task(&format!("acme-{i}"), "charge", Some(&ns("acme")));
        transport.dispatch(t).await.expect("dispatch");
    }
    transport
        .dispatch(task("globex-0", "charge", Some(&ns("globex"))))
        .await
        .expect("dispatch");
    // The backlog is queued before the worker comes: what it is handed first is the
    // transport's choice, not arrival order.
    let mut worker = transport
        .consume_tasks(subscription("charge", vec![ns("acme"), ns("globex")]))
        .await
        .expect("consumer");
    let mut position = None;
    for i in 0..101 {
        let got = next(&mut worker).await.expect("a task");
        if got.run_id.as_str() == "globex-0" {
            position = Some(i);
            break;
        }
    }
    let position = position.expect("globex's task arrived");
    assert!(
        position <= 40,
        "globex's task came after {position} of acme's"
    );
}

/// A step's waiting tasks go as the wire's `priority` orders them (WIRE.md §2, BullMQ's order):
/// those without one first, in arrival order, then the higher priority first.
pub async fn tasks_of_a_step_go_by_priority(transport: Arc<dyn Transport>) {
    let acme = ns("acme");
    for (run, priority) in [
        ("p1", Some(1)),
        ("none", None),
        ("p9", Some(9)),
        ("p5", Some(5)),
    ] {
        let mut t = task(run, "ship", Some(&acme));
        t.priority = priority;
        transport.dispatch(t).await.expect("dispatch");
    }
    let mut worker = transport
        .consume_tasks(subscription("ship", vec![acme]))
        .await
        .expect("consumer");
    let mut order = Vec::new();
    for _ in 0..4 {
        order.push(next(&mut worker).await.expect("a task").run_id.to_string());
    }
    assert_eq!(order, ["none", "p9", "p5", "p1"]);
}

/// Rate allowances: a burst of the rate, then a refusal saying when one frees; each tenant
/// spends its own.
pub async fn rate_allowances_are_per_tenant(transport: Arc<dyn Transport>) {
    let now = 1_000_000;
    for _ in 0..3 {
        assert_eq!(
            transport
                .take(&ns("acme"), "starts", 3, now)
                .await
                .expect("take"),
            None
        );
    }
    let wait = transport
        .take(&ns("acme"), "starts", 3, now)
        .await
        .expect("take");
    assert_eq!(wait, Some(20_000), "one frees every 20 s at 3 a minute");
    assert_eq!(
        transport
            .take(&ns("globex"), "starts", 3, now)
            .await
            .expect("take"),
        None
    );
    assert_eq!(
        transport
            .take(&ns("acme"), "steps", 3, now)
            .await
            .expect("take"),
        None
    );
    assert_eq!(
        transport
            .take(&ns("acme"), "starts", 3, now + 20_000)
            .await
            .expect("take"),
        None
    );
}

/// Concurrency slots: at most the limit hold one, a holder taking again keeps (and renews) its
/// own, a run without room waits in line once and is named by the release that frees a slot,
/// a lease that ran out frees its slot, a renewed one does not, and each tenant has its own.
pub async fn concurrency_slots_hold_their_limit_per_tenant(transport: Arc<dyn Transport>) {
    /// Takes a slot of acme's `c1` (limit 2) for `holder` at `at`, leased for 30 s.
    async fn take(transport: &dyn Transport, holder: &str, waiter: &RunId, at: i64) -> bool {
        let claim = SlotClaim {
            holder,
            waiter,
            limit: 2,
            until: at + 30_000,
        };
        transport
            .acquire(&ns("acme"), "steps:charge:c1", claim, at)
            .await
            .expect("acquire")
    }
    let t = transport.as_ref();
    let acme = ns("acme");
    let run = |id: &str| RunId::parse(id).expect("id");
    let (r1, r2, r3) = (run("r1"), run("r2"), run("r3"));
    let now = 1_000_000;
    assert!(take(t, "r1:0", &r1, now).await);
    assert!(take(t, "r2:0", &r2, now).await);
    assert!(
        take(t, "r2:0", &r2, now).await,
        "a holder keeps its own slot"
    );
    assert!(!take(t, "r3:0", &r3, now).await, "the third waits");
    assert!(
        !take(t, "r3:0", &r3, now + 1).await,
        "looking again keeps its place"
    );
    // Another tenant, and another counter, have their own slots.
    let claim = SlotClaim {
        holder: "x:0",
        waiter: &r3,
        limit: 1,
        until: now + 30_000,
    };
    for (tenant, counter) in [("globex", "steps:charge:c1"), ("acme", "steps:charge:c2")] {
        let taken = t
            .acquire(&ns(tenant), counter, claim, now)
            .await
            .expect("acquire");
        assert!(taken, "{tenant} {counter}");
    }
    // Giving one back names the waiter, once; a second release names nobody.
    let next = t
        .release(&acme, "steps:charge:c1", "r1:0")
        .await
        .expect("release");
    assert_eq!(next, Some(r3.clone()));
    let again = t
        .release(&acme, "steps:charge:c1", "r1:0")
        .await
        .expect("release");
    assert_eq!(again, None);
    assert!(take(t, "r3:0", &r3, now + 2).await, "the freed slot");
    // A lease that ran out frees its slot; a renewed one holds.
    t.renew(&acme, "steps:charge:c1", "r3:0", now + 90_000, now + 20_000)
        .await
        .expect("renew");
    assert!(
        take(t, "r1:1", &r1, now + 40_000).await,
        "r2's lease ended at +30 s: its slot is free"
    );
    assert!(
        !take(t, "r2:1", &r2, now + 40_000).await,
        "r3 renewed to +90 s and r1 holds the other"
    );
}

/// A tenant's event stream carries only its own events; the operator's carries every one.
pub async fn events_stay_inside_their_tenant(transport: Arc<dyn Transport>) {
    let mut acme = transport
        .subscribe_events(Scope::Only(ns("acme")))
        .await
        .expect("acme events");
    let mut all = transport
        .subscribe_events(Scope::All)
        .await
        .expect("every event");
    transport
        .publish_event(event("run-g", "globex"))
        .await
        .expect("publish");
    transport
        .publish_event(event("run-a", "acme"))
        .await
        .expect("publish");
    let first = |d: Option<EventDelivery>| match d {
        Some(EventDelivery::Event(e)) => e.run_id.to_string(),
        other => panic!("expected an event, got {other:?}"),
    };
    assert_eq!(first(next(&mut acme).await), "run-a");
    quiet(&mut acme).await;
    assert_eq!(first(next(&mut all).await), "run-g");
    assert_eq!(first(next(&mut all).await), "run-a");
}

/// A control message reaches every subscriber, the sender's own included.
pub async fn control_messages_reach_every_process(transport: Arc<dyn Transport>) {
    let mut one = transport.subscribe_control().await.expect("subscribe");
    let mut two = transport.subscribe_control().await.expect("subscribe");
    let message = ControlMessage {
        from: Some("cp-test".into()),
        notice: ControlNotice::Cancel {
            run_id: RunId::parse("run-cx").expect("id"),
        },
    };
    transport
        .publish_control(message.clone())
        .await
        .expect("publish");
    assert_eq!(next(&mut one).await, Some(message.clone()));
    assert_eq!(next(&mut two).await, Some(message));
}

/// A definitions notice, and an acknowledgement of one, reach every subscriber as sent.
pub async fn definition_notices_reach_every_subscriber(transport: Arc<dyn Transport>) {
    let mut one = transport.subscribe_definitions().await.expect("subscribe");
    let mut two = transport.subscribe_definitions().await.expect("subscribe");
    let notice = DefinitionsNotice {
        tenant: ns("acme"),
        version: 7,
        seen_by: None,
    };
    let ack = DefinitionsNotice {
        seen_by: Some("cp-b".into()),
        ..notice.clone()
    };
    for sent in [notice, ack] {
        transport
            .publish_definitions(sent.clone())
            .await
            .expect("publish");
        assert_eq!(next(&mut one).await, Some(sent.clone()));
        assert_eq!(next(&mut two).await, Some(sent));
    }
}

/// A consuming worker shows up as a worker group of its partition, to that tenant and the
/// operator only, and disappears when it stops.
pub async fn worker_groups_follow_consumers(transport: Arc<dyn Transport>) {
    let consumer = transport
        .consume_tasks(subscription("billing.invoice", vec![ns("acme")]))
        .await
        .expect("consumer");
    let tokens = |groups: Vec<crate::model::WorkerGroup>| {
        groups
            .into_iter()
            .map(|g| (g.token(), g.workers))
            .collect::<Vec<_>>()
    };
    let mut seen = Vec::new();
    for _ in 0..50 {
        seen = tokens(
            transport
                .worker_groups(&Scope::Only(ns("acme")))
                .await
                .expect("groups"),
        );
        if !seen.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(seen, [("billing.invoice@acme".to_owned(), 1)]);
    assert!(
        transport
            .worker_groups(&Scope::Only(ns("globex")))
            .await
            .expect("groups")
            .is_empty(),
        "another tenant does not see acme's workers"
    );
    assert_eq!(
        tokens(transport.worker_groups(&Scope::All).await.expect("groups")),
        [("billing.invoice@acme".to_owned(), 1)]
    );
    drop(consumer);
    for _ in 0..100 {
        if transport
            .worker_groups(&Scope::All)
            .await
            .expect("groups")
            .is_empty()
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("a stopped worker is still listed");
}

/// A run request reaches the responder raw, and its reply reaches every listener.
pub async fn run_requests_and_replies_travel(transport: Arc<dyn Transport>) {
    let mut requests = transport.consume_run_requests().await.expect("consume");
    let mut replies = transport.subscribe_run_replies().await.expect("subscribe");
    let raw = r#"{"requestId":"req-1","tenant":"acme.sig","body":{"kind":"listRuns"}}"#;
    transport
        .send_run_request(raw.to_owned())
        .await
        .expect("send");
    transport
        .send_run_request("{not json".to_owned())
        .await
        .expect("send");
    assert_eq!(next(&mut requests).await.as_deref(), Some(raw));
    assert_eq!(
        next(&mut requests).await.as_deref(),
        Some("{not json"),
        "malformed requests still reach the responder"
    );
    let reply = crate::model::RunReply::ok("req-1", json!([]));
    transport
        .publish_run_reply(reply.clone())
        .await
        .expect("reply");
    assert_eq!(next(&mut replies).await, Some(reply));
}

/// A start-run message reaches the responder raw, malformed or not, in the order sent.
pub async fn start_run_messages_travel(transport: Arc<dyn Transport>) {
    let mut starts = transport.consume_start_runs().await.expect("consume");
    let raw = r#"{"tenant":"acme.sig","workflow":"checkout","input":{},"runId":"run-1"}"#;
    transport
        .send_start_run(raw.to_owned())
        .await
        .expect("send");
    transport
        .send_start_run("[1,".to_owned())
        .await
        .expect("send");
    assert_eq!(next(&mut starts).await.as_deref(), Some(raw));
    assert_eq!(next(&mut starts).await.as_deref(), Some("[1,"));
}

/// Run beats reach every process that listens, whoever sent them.
pub async fn beats_reach_every_process(transport: Arc<dyn Transport>) {
    let mut beats = [
        transport.subscribe_heartbeats().await.expect("subscribe"),
        transport.subscribe_heartbeats().await.expect("subscribe"),
    ];
    let beat = crate::model::Heartbeat {
        run_id: RunId::parse("run-beat").expect("id"),
        seq: 0,
        step_id: None,
        group: "billing.close-month@acme".into(),
    };
    transport
        .publish_heartbeat(beat.clone())
        .await
        .expect("beat");
    for heard in &mut beats {
        assert_eq!(next(heard).await, Some(beat.clone()));
    }
}

/// Relayed decisions reach every process that listens, whoever relayed them (a transport with
/// remote turns only).
pub async fn relayed_decisions_reach_every_process(transport: Arc<dyn Transport>) {
    let turns = transport
        .remote_turns()
        .expect("this case runs only on a transport with remote turns");
    let mut relays = [
        turns
            .subscribe_relayed_decisions()
            .await
            .expect("subscribe"),
        turns
            .subscribe_relayed_decisions()
            .await
            .expect("subscribe"),
    ];
    let decision = json!({ "taskId": "run-beat:wf:1", "runId": "run-beat", "status": "continue", "commands": [] });
    turns.relay_decision(decision.clone()).await.expect("relay");
    for heard in &mut relays {
        assert_eq!(next(heard).await, Some(decision.clone()));
    }
}

/// The descriptors on a token are those its live consumers announced: their steps and
/// capabilities, none from another partition's token, and none once they stop.
pub async fn descriptors_describe_a_tokens_live_workers(transport: Arc<dyn Transport>) {
    let consumer = transport
        .consume_tasks(TaskSubscription {
            names: vec!["ship".into()],
            partitions: Partitions::Only(vec![ns("acme").into()]),
            concurrency: 1,
            workflows: Vec::new(),
            capabilities: vec!["saga".into(), "search-attr-v2".into()],
        })
        .await
        .expect("consumer");
    let mut seen = Vec::new();
    // The directory may answer from a read made just before the worker announced itself.
    for _ in 0..100 {
        seen = transport
            .worker_descriptors("ship@acme")
            .await
            .expect("descriptors");
        if !seen.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(seen.len(), 1, "one live worker on ship@acme: {seen:?}");
    assert_eq!(seen[0].steps, ["ship"]);
    assert_eq!(seen[0].capabilities, ["saga", "search-attr-v2"]);
    assert_eq!(seen[0].partition.as_deref(), Some("acme"));
    assert!(
        transport
            .worker_descriptors("ship@globex")
            .await
            .expect("descriptors")
            .is_empty(),
        "acme's worker is not on globex's token"
    );
    drop(consumer);
    for _ in 0..100 {
        if transport
            .worker_descriptors("ship@acme")
            .await
            .expect("descriptors")
            .is_empty()
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("a stopped worker's descriptor is still read");
}

/// Stamps every transport conformance case as a `#[tokio::test]`. `$make` is an async
/// expression giving `Option<Arc<dyn Transport>>`; `None` skips the case (the backend is absent
/// here and `make test` already said so loudly). A transport that offers remote turns adds
/// `remote_turns` to stamp their cases too.
#[macro_export]
macro_rules! transport_conformance {
    ($make:expr) => {
        $crate::transport_conformance!(@cases $make;
            tasks_reach_only_their_partition,
            a_task_is_outstanding_until_its_result_is_sent,
            events_stay_inside_their_tenant,
            control_messages_reach_every_process,
            definition_notices_reach_every_subscriber,
            worker_groups_follow_consumers,
            descriptors_describe_a_tokens_live_workers,
            run_requests_and_replies_travel,
            start_run_messages_travel,
            beats_reach_every_process,
            a_tenants_backlog_does_not_hold_back_anothers_task,
            tasks_of_a_step_go_by_priority,
            rate_allowances_are_per_tenant,
            concurrency_slots_hold_their_limit_per_tenant
        );
    };
    ($make:expr, remote_turns) => {
        $crate::transport_conformance!($make);
        $crate::transport_conformance!(@cases $make; relayed_decisions_reach_every_process);
    };
    (@cases $make:expr; $($case:ident),*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                if let Some(transport) = $make.await {
                    $crate::transport::conformance::$case(transport).await;
                }
            }
        )*
    };
}
