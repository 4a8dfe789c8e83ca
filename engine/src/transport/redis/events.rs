//! Tenant events as the wire carries them (§4.3): `{"tenant", "event": EngineEvent}` with the
//! event's `at` as an ISO-8601 string. Our own fields ride along (receivers ignore unknown
//! fields), and events from other control planes, which lack them, are read too. One of ours is
//! `origin`, the publishing transport: it hands its own events to its subscribers directly, and
//! skips them when Redis echoes them back.

use async_trait::async_trait;
use serde::Serialize;
use serde_json::Value;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use tokio::sync::broadcast;

use super::pubsub::{Heard, Target};
use super::{RedisTransport, unavailable};
use crate::model::{Millis, Namespace, RunId, RunStatus, Scope, TenantEvent, TenantEventKind};
use crate::transport::naming::{tenant_events_channel, tenant_events_pattern};
use crate::transport::{EventDelivery, Subscription, TenantEvents, TransportResult};

/// The wire message for `event`, published by transport `origin`. `origin` comes first, so a
/// transport tells its own echo without parsing it; the message is written straight from the
/// event (a burst publishes thousands a second), with no JSON tree in between.
pub(super) fn to_wire(event: &TenantEvent, origin: &str) -> String {
    /// [`TenantEvent`] as the wire has it: `at` as an ISO-8601 string.
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Body<'a> {
        #[serde(rename = "type")]
        kind: &'a TenantEventKind,
        namespace: &'a Namespace,
        run_id: &'a RunId,
        workflow: &'a str,
        status: &'a RunStatus,
        #[serde(skip_serializing_if = "Option::is_none")]
        seq: Option<u32>,
        at: At,
    }
    #[derive(Serialize)]
    #[serde(untagged)]
    enum At {
        Iso(String),
        /// A time too far out for a calendar date, kept as milliseconds.
        Millis(Millis),
    }
    #[derive(Serialize)]
    struct Message<'a> {
        origin: &'a str,
        tenant: &'a Namespace,
        event: Body<'a>,
    }
    let message = Message {
        origin,
        tenant: &event.namespace,
        event: Body {
            kind: &event.kind,
            namespace: &event.namespace,
            run_id: &event.run_id,
            workflow: &event.workflow,
            status: &event.status,
            seq: event.seq,
            at: iso(event.at).map_or(At::Millis(event.at), At::Iso),
        },
    };
    // Plain data with string keys always serializes.
    serde_json::to_string(&message).unwrap_or_default()
}

/// Whether `raw` is an event transport `me` published (see [`to_wire`]), told by its first
/// bytes alone.
fn is_echo(raw: &str, me: &str) -> bool {
    raw.strip_prefix("{\"origin\":\"")
        .and_then(|rest| rest.strip_prefix(me))
        .is_some_and(|rest| rest.starts_with('"'))
}

/// Reads a wire message back; `None` for one that is not a run event we can show, or that
/// transport `me` published itself (its subscribers had it already).
pub(super) fn from_wire(raw: &str, me: &str) -> Option<TenantEvent> {
    if is_echo(raw, me) {
        return None;
    }
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

#[async_trait]
impl TenantEvents for RedisTransport {
    async fn publish_event(&self, event: TenantEvent) -> TransportResult<()> {
        self.publish_events(vec![event]).await
    }

    async fn publish_events(&self, batch: Vec<TenantEvent>) -> TransportResult<()> {
        let count = batch.len();
        let mut pipe = redis::pipe();
        for event in batch {
            // The wire publishes only non-default namespaces; we publish `default` too, on its
            // own channel, so a dashboard on another process sees a standalone tenant's events.
            let channel = tenant_events_channel(&self.shared.p, &event.namespace);
            let wire = to_wire(&event, &self.shared.instance);
            pipe.cmd("PUBLISH").arg(channel).arg(wire).ignore();
            // Nobody listening here is fine: the event still goes to the other processes.
            let _ = self.shared.local_events.send(event);
        }
        let mut conn = self.shared.conn.clone();
        pipe.query_async::<()>(&mut conn)
            .await
            .map_err(|e| unavailable(format!("publishing {count} tenant events: {e}")))
    }

    async fn subscribe_events(&self, scope: Scope) -> TransportResult<Subscription<EventDelivery>> {
        let target = match scope.namespace() {
            Some(ns) => Target::Channel(tenant_events_channel(&self.shared.p, ns)),
            None => Target::Pattern(tenant_events_pattern(&self.shared.p)),
        };
        // Local first, so that nothing published once this returns is missed either way.
        let local = self.shared.local_events.subscribe();
        let rx = self.listen(target).await?;
        let me = self.shared.instance.clone();
        let remote =
            futures::stream::unfold((rx, scope.clone(), me), |(mut rx, scope, me)| async move {
                loop {
                    match rx.recv().await? {
                        Heard::Gap => return Some((EventDelivery::Lagged(0), (rx, scope, me))),
                        Heard::Message(raw) => match from_wire(&raw, &me) {
                            // The channel is the tenant's; the check is for the pattern's sake.
                            Some(event) if scope.admits(&event.namespace) => {
                                return Some((EventDelivery::Event(event), (rx, scope, me)));
                            }
                            _ => continue,
                        },
                    }
                }
            });
        let local = futures::stream::unfold((local, scope), |(mut local, scope)| async move {
            loop {
                let delivery = match local.recv().await {
                    Ok(event) if scope.admits(&event.namespace) => EventDelivery::Event(event),
                    Ok(_) => continue,
                    Err(broadcast::error::RecvError::Lagged(n)) => EventDelivery::Lagged(n),
                    Err(broadcast::error::RecvError::Closed) => return None,
                };
                return Some((delivery, (local, scope)));
            }
        });
        Ok(Box::pin(futures::stream::select(local, remote)))
    }
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
        let raw = to_wire(&event, "cp-1");
        let wire: Value = serde_json::from_str(&raw).expect("json");
        assert_eq!(wire["tenant"], "acme");
        assert_eq!(wire["event"]["at"], "2026-11-29T08:05:20.882Z");
        assert_eq!(wire["event"]["runId"], "run-1");
        assert_eq!(from_wire(&raw, "cp-2"), Some(event));
        assert_eq!(
            from_wire(&raw, "cp-1"),
            None,
            "its own events come back to no one"
        );
        assert_eq!(
            from_wire(&raw, "cp-"),
            from_wire(&raw, "cp-2"),
            "another origin that is a prefix of it is not its echo"
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
