//! Logs and traces: the process's `tracing` subscriber. Logs go to stderr, as text or, with
//! `DURABLE_LOG_FORMAT=json`, one JSON object per line, filtered by `RUST_LOG`. Traces are off
//! unless `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) names a
//! collector: spans are then exported over OTLP/HTTP (protobuf), `service.name` from
//! `OTEL_SERVICE_NAME` (default `durable`).

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, SpanExporter, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::Level;
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer, Registry};

/// Why the subscriber could not be set up; each names the setting to fix.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// `DURABLE_LOG_FORMAT` is neither `text` nor `json`.
    #[error("DURABLE_LOG_FORMAT is `{0}`; use `json` or `text` (the default)")]
    LogFormat(String),
    /// `OTEL_EXPORTER_OTLP_PROTOCOL` asks for something this build does not speak.
    #[error(
        "OTEL_EXPORTER_OTLP_PROTOCOL is `{0}`; durable exports traces over OTLP/HTTP: set it to \
         `http/protobuf` (or unset it) and point OTEL_EXPORTER_OTLP_ENDPOINT at the collector's \
         HTTP port (4318)"
    )]
    Protocol(String),
    /// The exporter could not be built.
    #[error("cannot export traces to OTEL_EXPORTER_OTLP_ENDPOINT: {0}")]
    Exporter(String),
}

/// Keeps the trace exporter while the process runs; dropping it sends the spans still queued.
pub struct Telemetry {
    traces: Option<SdkTracerProvider>,
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        if let Some(traces) = self.traces.take()
            && let Err(e) = traces.shutdown()
        {
            eprintln!("warning: the last spans could not be exported: {e}");
        }
    }
}

/// Installs the subscriber for this process.
pub fn init() -> Result<Telemetry, TelemetryError> {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| "info,sqlx=warn,tower_sessions=warn".into());
    let logs = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    // One JSON object per line for a log pipeline: each with the fields of the spans it was
    // logged in (a run's tenant, id and workflow).
    let logs: Box<dyn Layer<Registry> + Send + Sync> =
        match std::env::var("DURABLE_LOG_FORMAT").as_deref() {
            Ok("json") => logs
                .json()
                .with_current_span(true)
                .with_span_list(true)
                .with_filter(filter)
                .boxed(),
            Ok("text") | Err(std::env::VarError::NotPresent) => logs.with_filter(filter).boxed(),
            Ok(other) => return Err(TelemetryError::LogFormat(other.to_owned())),
            Err(std::env::VarError::NotUnicode(_)) => {
                return Err(TelemetryError::LogFormat("not UTF-8".into()));
            }
        };
    let traces = tracer_provider()?;
    // A run's spans are traced whatever `RUST_LOG` lets through to the log: only durable's
    // own (start, run, turn, step, signal, request), at info, and not those of a trace its
    // root chose not to sample (`OTEL_TRACES_SAMPLER`): those are not built at all.
    let spans = traces.as_ref().map(|provider| {
        tracing_opentelemetry::layer()
            .with_tracer(provider.tracer("durable"))
            .with_filter(
                Targets::new()
                    .with_target("durable", Level::INFO)
                    .with_target(durable::trace_context::UNSAMPLED, LevelFilter::OFF),
            )
            .boxed()
    });
    Registry::default().with(logs).with(spans).init();
    Ok(Telemetry { traces })
}

/// The OTLP trace pipeline, when a collector is configured.
fn tracer_provider() -> Result<Option<SdkTracerProvider>, TelemetryError> {
    let configured = [
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    ]
    .iter()
    .any(|name| std::env::var_os(name).is_some_and(|v| !v.is_empty()));
    if !configured {
        return Ok(None);
    }
    for name in [
        "OTEL_EXPORTER_OTLP_PROTOCOL",
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    ] {
        match std::env::var(name).as_deref() {
            Ok("http/protobuf") | Err(_) => {}
            Ok(other) => return Err(TelemetryError::Protocol(other.to_owned())),
        }
    }
    let exporter = SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .build()
        .map_err(|e| TelemetryError::Exporter(e.to_string()))?;
    let mut resource = Resource::builder();
    if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
        resource = resource.with_service_name("durable");
    }
    Ok(Some(
        SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource.build())
            .build(),
    ))
}
