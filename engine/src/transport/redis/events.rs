//! Tenant events as the wire carries them (§4.3): `{"tenant", "event": EngineEvent}` with the
//! event's `at` as an ISO-8601 string. Our own fields ride along (receivers ignore unknown
//! fields), and events from other control planes, which lack them, are read too. One of ours is
//! `origin`, the publishing transport: it hands its own events to its subscribers directly, and
//! skips them when Redis echoes them back.

use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::model::{Millis, RunStatus, TenantEvent, TenantEventKind};

/// The wire message for `event`, published by transport `origin`.
pub(super) fn to_wire(event: &TenantEvent, origin: &str) -> Value {
    let mut body = serde_json::to_value(event).unwrap_or_else(|_| json!({}));
    if let Some(iso) = iso(event.at) {
        body["at"] = Value::String(iso);
    }
    json!({ "tenant": event.namespace, "event": body, "origin": origin })
}

/// Reads a wire message back; `None` for one that is not a run event we can show, or that
/// transport `me` published itself (its subscribers had it already).
pub(super) fn from_wire(raw: &str, me: &str) -> Option<TenantEvent> {
    let message: Value = serde_json::from_str(raw).ok()?;
    if message.get("origin").and_then(Value::as_str) == Some(me) {
        return None;
    }
    let mut event = message.get("event")?.clone();
    let object = event.as_object_mut()?;
    let at = match object.get("at") {
        Some(Value::String(s)) => parse_iso(s)?,
        Some(v) => v.as_i64()?,
        None => return None,
    };
    object.insert("at".into(), Value::from(at));
    if !object.contains_key("namespace") {
        object.insert("namespace".into(), message.get("tenant")?.clone());
    }
    if !object.contains_key("status") {
        let kind: TenantEventKind = serde_json::from_value(object.get("type")?.clone()).ok()?;
        let status = match kind {
            TenantEventKind::RunStarted => RunStatus::Pending,
            TenantEventKind::RunSuspended => RunStatus::Suspended,
            TenantEventKind::RunBlocked => RunStatus::Blocked,
            TenantEventKind::RunCompleted => RunStatus::Completed,
            TenantEventKind::RunFailed => RunStatus::Failed,
            TenantEventKind::RunRunning
            | TenantEventKind::StepCompleted
            | TenantEventKind::StepFailed => RunStatus::Running,
        };
        object.insert("status".into(), serde_json::to_value(status).ok()?);
    }
    if !object.contains_key("workflow") {
        object.insert("workflow".into(), Value::String(String::new()));
    }
    serde_json::from_value(event).ok()
}

fn iso(ms: Millis) -> Option<String> {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .ok()?
        .format(&Rfc3339)
        .ok()
}

fn parse_iso(s: &str) -> Option<Millis> {
    let t = OffsetDateTime::parse(s, &Rfc3339).ok()?;
    Some((t.unix_timestamp_nanos() / 1_000_000) as Millis)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Namespace, RunId};

    #[test]
    fn events_round_trip_with_iso_times_and_foreign_ones_are_read() {
        let event = TenantEvent {
            kind: TenantEventKind::RunCompleted,
            namespace: Namespace::parse("acme").expect("ns"),
            run_id: RunId::parse("run-1").expect("id"),
            workflow: "demo.order".into(),
            status: RunStatus::Completed,
            seq: None,
            at: 1_795_939_520_882,
        };
        let wire = to_wire(&event, "cp-1");
        assert_eq!(wire["tenant"], "acme");
        assert_eq!(wire["event"]["at"], "2026-11-29T08:05:20.882Z");
        assert_eq!(from_wire(&wire.to_string(), "cp-2"), Some(event));
        assert_eq!(
            from_wire(&wire.to_string(), "cp-1"),
            None,
            "its own events come back to no one"
        );
        let foreign = r#"{"tenant":"acme","event":{"type":"run.failed","runId":"run-2","at":"2026-11-29T08:05:20.882Z"}}"#;
        let read = from_wire(foreign, "cp-1").expect("a foreign run event");
        assert_eq!(read.status, RunStatus::Failed);
        assert_eq!(read.namespace.as_str(), "acme");
        assert_eq!(
            from_wire(
                r#"{"tenant":"acme","event":{"type":"step.progress"}}"#,
                "cp-1"
            ),
            None
        );
        assert_eq!(from_wire("not json", "cp-1"), None);
    }
}
