//! Traces: one trace per run, across processes. A control plane on PostgreSQL and Redis exports
//! to an OTLP/HTTP receiver in this test; an unmodified Python SDK worker runs the steps, its
//! handlers tracing with OpenTelemetry's Python SDK. A start that carries the caller's
//! `traceparent` puts the start, every turn, the children's turns and every step the Python
//! worker ran into the caller's trace; a signal joins the trace of the run it reaches; a trace
//! its root did not sample is traced nowhere, and its steps start no trace of their own.

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::routing::post;
use common::{PythonWorker, Server, cli, start_run, tempdir, wait_status};
use durable::store::postgres_testing;
use durable::transport::redis_testing::{fresh_transport, python, test_url};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use prost::Message;
use serde_json::json;

/// A span as the receiver got it.
#[derive(Clone, Debug)]
struct Received {
    service: String,
    name: String,
    trace_id: String,
    attributes: HashMap<String, String>,
}

/// An OTLP/HTTP trace receiver on a free port: what it received, in order.
struct Collector {
    endpoint: String,
    spans: Arc<Mutex<Vec<Received>>>,
}

impl Collector {
    async fn start() -> Collector {
        let spans = Arc::new(Mutex::new(Vec::new()));
        let app = Router::new()
            .route("/v1/traces", post(receive))
            .with_state(spans.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let endpoint = format!("http://{}", listener.local_addr().expect("addr"));
        tokio::spawn(async move { axum::serve(listener, app).await });
        Collector { endpoint, spans }
    }

    fn spans(&self) -> Vec<Received> {
        self.spans.lock().expect("lock").clone()
    }

    /// Waits (30 s at most) until `done` holds of what was received.
    async fn until(&self, what: &str, done: impl Fn(&[Received]) -> bool) -> Vec<Received> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let spans = self.spans();
            if done(&spans) {
                return spans;
            }
            assert!(
                Instant::now() < deadline,
                "never received {what}; got {:#?}",
                spans
                    .iter()
                    .map(|s| (&s.service, &s.name, &s.trace_id))
                    .collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

async fn receive(State(spans): State<Arc<Mutex<Vec<Received>>>>, body: Bytes) -> &'static str {
    let request = ExportTraceServiceRequest::decode(body).expect("an OTLP protobuf export");
    let text = |v: &Option<opentelemetry_proto::tonic::common::v1::AnyValue>| match v
        .as_ref()
        .and_then(|v| v.value.as_ref())
    {
        Some(Any::StringValue(s)) => s.clone(),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    };
    let mut got = spans.lock().expect("lock");
    for resource_spans in request.resource_spans {
        let service = resource_spans
            .resource
            .iter()
            .flat_map(|r| &r.attributes)
            .find(|a| a.key == "service.name")
            .map(|a| text(&a.value))
            .unwrap_or_default();
        for span in resource_spans.scope_spans.into_iter().flat_map(|s| s.spans) {
            got.push(Received {
                service: service.clone(),
                name: span.name,
                trace_id: hex(&span.trace_id),
                attributes: span
                    .attributes
                    .iter()
                    .map(|a| (a.key.clone(), text(&a.value)))
                    .collect(),
            });
        }
    }
    ""
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runs_trace_spans_the_caller_the_control_plane_and_the_python_worker() {
    let Some(python) = python() else {
        return;
    };
    let Some(transport) = fresh_transport().await else {
        return;
    };
    let Some(url) = postgres_testing::fresh_database().await else {
        return;
    };
    cli(&url, &["migrate"]);
    let collector = Collector::start().await;
    let cluster = vec![
        ("REDIS_URL", test_url()),
        ("DURABLE_PREFIX", transport.prefix().to_owned()),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", collector.endpoint.clone()),
        // Exported every 100 ms rather than every 5 s.
        ("OTEL_BSP_SCHEDULE_DELAY", "100".to_owned()),
    ];
    let mut control_plane_env = cluster.clone();
    control_plane_env.push(("DATABASE_URL", url));
    control_plane_env.push(("OTEL_SERVICE_NAME", "control-plane".to_owned()));
    let control_plane = Server::start_role(&tempdir(), "control-plane", &control_plane_env).await;
    let _python = PythonWorker::start(&python, "traced_worker.py", &cluster);

    let client = reqwest::Client::new();
    let acme = control_plane.token("acme");
    // The caller's trace: the run joins it.
    let caller = "4bf92f3577b34da6a3ce929d0e0e4736";
    let answer = client
        .post(control_plane.url("/api/v1/runs"))
        .bearer_auth(&acme)
        .header("traceparent", format!("00-{caller}-00f067aa0ba902b7-01"))
        .json(&json!({"workflow": "demo.fanout", "input": {"n": 2}}))
        .send()
        .await
        .expect("start");
    assert_eq!(answer.status(), 201);
    let fanout: serde_json::Value = answer.json().await.expect("json");
    let fanout = fanout["id"].as_str().expect("id").to_owned();
    let last = wait_status(&client, &control_plane, &acme, &fanout, "completed").await;
    assert_eq!(last["run"]["status"], "completed", "{last}");

    // Two children, three steps each, all run by the Python worker, all in the caller's trace.
    let spans = collector
        .until("the Python worker's six steps", |spans| {
            spans
                .iter()
                .filter(|s| s.service == "python-worker")
                .count()
                >= 6
        })
        .await;
    let python_spans: Vec<&Received> = spans
        .iter()
        .filter(|s| s.service == "python-worker")
        .collect();
    for span in &python_spans {
        assert_eq!(
            span.trace_id,
            caller,
            "a Python step outside the run's trace: {span:?}, among {:#?}",
            collector.spans()
        );
    }
    let ships = python_spans
        .iter()
        .filter(|s| s.name == "order.ship")
        .count();
    assert_eq!(ships, 2, "each child's order.ship, once");

    let spans = collector
        .until(
            "the control plane's spans of the run and its children",
            |spans| {
                let runs = spans
                    .iter()
                    .filter(|s| s.service == "control-plane" && s.name == "run")
                    .map(|s| s.attributes.get("run_id").cloned().unwrap_or_default())
                    .collect::<std::collections::HashSet<_>>();
                runs.len() >= 3
            },
        )
        .await;
    let ours: Vec<&Received> = spans
        .iter()
        .filter(|s| s.service == "control-plane" && s.trace_id == caller)
        .collect();
    let named = |name: &str| ours.iter().filter(|s| s.name == name).count();
    assert!(named("request") >= 1, "the start request");
    assert_eq!(named("start"), 1, "the start, once");
    assert!(named("run") >= 3, "the turns of the run and of each child");
    for span in spans
        .iter()
        .filter(|s| s.name == "run" || s.name == "start")
    {
        assert_eq!(
            span.trace_id, caller,
            "a run's span in another trace: {span:?}"
        );
    }

    // A signal joins the trace of the run it reaches (started without a caller's trace).
    let approval = start_run(
        &client,
        &control_plane,
        &acme,
        json!({"workflow": "demo.approval", "input": {"request": "a laptop"}}),
    )
    .await;
    let approval = approval["id"].as_str().expect("id").to_owned();
    let signalled = client
        .post(control_plane.url(&format!("/api/v1/runs/{approval}/signal")))
        .bearer_auth(&acme)
        .json(&json!({"name": "approve", "payload": {"by": "ann"}}))
        .send()
        .await
        .expect("signal");
    assert_eq!(signalled.status(), 200);
    let last = wait_status(&client, &control_plane, &acme, &approval, "completed").await;
    assert_eq!(last["run"]["status"], "completed", "{last}");
    let of_approval = |s: &Received| s.attributes.get("run_id") == Some(&approval);
    let spans = collector
        .until("the approval's start and signal", |spans| {
            spans.iter().any(|s| s.name == "signal" && of_approval(s))
                && spans.iter().any(|s| s.name == "start" && of_approval(s))
        })
        .await;
    let start = spans
        .iter()
        .find(|s| s.name == "start" && of_approval(s))
        .expect("the start");
    let signal = spans
        .iter()
        .find(|s| s.name == "signal" && of_approval(s))
        .expect("the signal");
    assert_ne!(
        start.trace_id, caller,
        "a start without a caller's trace begins its own"
    );
    assert_eq!(
        signal.trace_id, start.trace_id,
        "the signal joins its run's trace"
    );
    assert!(
        spans
            .iter()
            .filter(|s| s.name == "run" && of_approval(s))
            .all(|s| s.trace_id == start.trace_id),
        "every turn of the approval is in its trace"
    );

    // A caller's trace its root chose not to sample: the run and its steps are not traced
    // anywhere, and no step starts a trace of its own.
    let unsampled = "a3ce929d0e0e47364bf92f3577b34da6";
    let marker = "0e0e47364bf92f3577b34da6a3ce929d";
    for (trace, flags) in [(unsampled, "00"), (marker, "01")] {
        let answer = client
            .post(control_plane.url("/api/v1/runs"))
            .bearer_auth(&acme)
            .header(
                "traceparent",
                format!("00-{trace}-00f067aa0ba902b7-{flags}"),
            )
            .json(&json!({"workflow": "demo.fanout", "input": {"n": 2}}))
            .send()
            .await
            .expect("start");
        assert_eq!(answer.status(), 201);
        let run: serde_json::Value = answer.json().await.expect("json");
        let run = run["id"].as_str().expect("id").to_owned();
        let last = wait_status(&client, &control_plane, &acme, &run, "completed").await;
        assert_eq!(last["run"]["status"], "completed", "{last}");
    }
    // The marker's six Python steps arrive after anything the unsampled run could have sent.
    let spans = collector
        .until("the marker run's six Python steps", |spans| {
            spans
                .iter()
                .filter(|s| s.service == "python-worker" && s.trace_id == marker)
                .count()
                >= 6
        })
        .await;
    assert!(
        !spans.iter().any(|s| s.trace_id == unsampled),
        "a span of the unsampled trace was exported: {spans:#?}"
    );
    for span in spans.iter().filter(|s| s.service == "python-worker") {
        assert!(
            span.trace_id == caller || span.trace_id == marker,
            "a Python step began a trace of its own: {span:?}"
        );
    }
}
