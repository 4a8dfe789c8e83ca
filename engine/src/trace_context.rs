//! A run's trace across processes: the W3C `traceparent` of a span, and a span continuing the
//! trace one names. A run keeps the `traceparent` of its start (its row's `traceparent`), so
//! every turn, wherever and whenever it runs, joins that one trace; a step's task carries the
//! `traceparent` of the turn that sent it, so the worker's span (ours, or a Python handler's
//! through the task's `context`) joins it too.
//!
//! Spans are OpenTelemetry spans only where the process installed the OpenTelemetry layer (the
//! server does when `OTEL_EXPORTER_OTLP_ENDPOINT` is set); elsewhere a span has no trace, and
//! these read `None` and change nothing.

use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use serde_json::Value;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::model::RemoteTask;

/// The `traceparent` of `span` (`00-<trace id>-<span id>-<flags>`), if it is in a trace.
pub fn traceparent(span: &tracing::Span) -> Option<String> {
    let context = span.context();
    let span_context = context.span().span_context().clone();
    span_context.is_valid().then(|| {
        format!(
            "00-{}-{}-{:02x}",
            span_context.trace_id(),
            span_context.span_id(),
            span_context.trace_flags().to_u8()
        )
    })
}

/// The target of a span whose trace its root chose not to sample: the server's OpenTelemetry
/// layer leaves this target out, so a run's turns and steps in an unsampled trace cost no span
/// building (the log still gets their fields). [`span_in_trace!`] picks it.
pub const UNSAMPLED: &str = "durable::unsampled";

/// Whether `traceparent` names a trace its root chose not to sample (no `sampled` flag). A
/// missing or malformed one is not: its span is made as usual.
pub fn unsampled(traceparent: Option<&str>) -> bool {
    traceparent
        .and_then(parse)
        .is_some_and(|context| !context.is_sampled())
}

/// An info span named `$name` with `$fields`, in the trace `$traceparent` names: continuing
/// it, or, when its root did not sample it, under [`UNSAMPLED`] (no trace span is built; the
/// log still gets the fields). Every span of a run's trace is made here.
macro_rules! span_in_trace {
    ($traceparent:expr, $name:literal, $($fields:tt)*) => {{
        let traceparent: Option<&str> = $traceparent;
        if $crate::trace_context::unsampled(traceparent) {
            tracing::info_span!(target: $crate::trace_context::UNSAMPLED, $name, $($fields)*)
        } else {
            let span = tracing::info_span!($name, $($fields)*);
            $crate::trace_context::continue_trace(&span, traceparent);
            span
        }
    }};
}
pub(crate) use span_in_trace;

/// Stamps `task` with the current span's `traceparent`, or, where that span is not traced (its
/// trace unsampled), the one the task already carries (its run's), as its own field and in its
/// handler's `context`; nothing outside a trace.
pub(crate) fn stamp(task: &mut RemoteTask) {
    let Some(traceparent) =
        traceparent(&tracing::Span::current()).or_else(|| task.traceparent.clone())
    else {
        return;
    };
    if let Some(Value::Object(context)) = &mut task.context {
        context.insert("traceparent".into(), Value::String(traceparent.clone()));
    }
    task.traceparent = Some(traceparent);
}

/// Makes `span` (not yet entered) continue the trace `traceparent` names; nothing when there
/// is none or it is malformed.
pub fn continue_trace(span: &tracing::Span, traceparent: Option<&str>) {
    if let Some(parent) = traceparent.and_then(parse) {
        let context = opentelemetry::Context::new().with_remote_span_context(parent);
        // Refused only for a span already started or without the layer: it then stays a root.
        let _ = span.set_parent(context);
    }
}

/// A `traceparent` as W3C Trace Context spells it: version `00`, a 32-digit trace id and a
/// 16-digit span id (neither all zeros) and 2 digits of flags, lowercase hex.
fn parse(traceparent: &str) -> Option<SpanContext> {
    let mut parts = traceparent.split('-');
    let (version, trace, span, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let hex = |s: &str, len: usize| {
        s.len() == len && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    };
    if parts.next().is_some()
        || version != "00"
        || !hex(trace, 32)
        || !hex(span, 16)
        || !hex(flags, 2)
    {
        return None;
    }
    let trace_id = TraceId::from_hex(trace).ok()?;
    let span_id = SpanId::from_hex(span).ok()?;
    let flags = TraceFlags::new(u8::from_str_radix(flags, 16).ok()?);
    let context = SpanContext::new(trace_id, span_id, flags, true, TraceState::default());
    context.is_valid().then_some(context)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_well_formed_traceparents_are_continued() {
        let good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let parsed = parse(good).expect("a valid traceparent");
        assert_eq!(
            parsed.trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert_eq!(parsed.span_id().to_string(), "00f067aa0ba902b7");
        assert!(parsed.is_sampled());
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e47-00f067aa0ba902b7-01",
        ] {
            assert!(parse(bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn a_trace_without_the_sampled_flag_is_unsampled() {
        assert!(unsampled(Some(
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"
        )));
        assert!(!unsampled(Some(
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        )));
        assert!(!unsampled(None));
        assert!(!unsampled(Some("garbage")));
    }

    #[test]
    fn without_the_layer_a_span_has_no_traceparent() {
        let span = tracing::info_span!("run");
        assert_eq!(traceparent(&span), None);
        continue_trace(
            &span,
            Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
        );
    }
}
