//! The worker handshake (aviary wire §6): what a worker announces about itself per token it
//! consumes, and the hash every SDK computes over it, so a control plane re-reads a descriptor
//! only when it changed.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The capabilities every v1 SDK advertises.
pub const V1_CAPABILITIES: [&str; 11] = [
    "saga",
    "signals",
    "search-attributes",
    "priority",
    "entities",
    "child-workflows",
    "singleton",
    "schedules",
    "continue-as-new",
    "queries",
    "cancellation",
];

/// An SDK's name and version.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sdk {
    /// Package name (`durable-worker`, `@adonis-agora/durable`, ...).
    pub name: String,
    /// Its version.
    pub version: String,
}

/// The protocol versions a worker speaks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Protocol {
    /// The version it prefers.
    pub version: u32,
    /// `[min, max]` it accepts.
    pub range: [u32; 2],
}

impl Default for Protocol {
    fn default() -> Self {
        Protocol {
            version: 1,
            range: [1, 1],
        }
    }
}

/// A workflow a worker can run turns of, as it announces it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Registration {
    /// Workflow name.
    pub name: String,
    /// Its version (a string on the wire).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The token its turns are consumed on (`pipeline@acme`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Capabilities it requires of the control plane.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requires: Option<Vec<String>>,
    /// Free-form origin label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
    /// Compensation routing (`[{code?, workflow}]`), kept as sent.
    #[serde(default, rename = "onError", skip_serializing_if = "Option::is_none")]
    pub on_error: Option<Vec<Value>>,
}

/// What a worker announces under `P-worker-descriptor:<token>:<instanceId>` (wire §6.1).
/// Missing fields read back as the wire's defaults.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkerDescriptor {
    /// `py-<host>-<pid>`, `ts-…`, `rs-…`.
    pub instance_id: String,
    /// `node` or `python` (a Rust process says `node` until the SDKs accept more, wire §8.17).
    pub runtime: String,
    /// The SDK.
    #[serde(default = "unknown_sdk")]
    pub sdk: Sdk,
    /// Protocol versions.
    #[serde(default)]
    pub protocol: Protocol,
    /// Capabilities (absent means the v1 baseline; an explicit `[]` stays empty).
    #[serde(default = "v1_capabilities")]
    pub capabilities: Vec<String>,
    /// Workflow names served.
    #[serde(default)]
    pub workflows: Vec<String>,
    /// Raw step names served.
    #[serde(default)]
    pub steps: Vec<String>,
    /// Workflow registrations (absent is not the same as empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registrations: Option<Vec<Registration>>,
    /// The partition served.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<String>,
    /// The namespace (absent for `default`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Process start, epoch ms.
    #[serde(default)]
    pub started_at: i64,
}

fn unknown_sdk() -> Sdk {
    Sdk {
        name: "unknown".into(),
        version: "0".into(),
    }
}

/// What of the v1 baseline this engine implements, and so what its workers advertise: not
/// `entities` or `singleton`, so a control plane never sends one of our workers work that needs
/// them.
pub const ENGINE_CAPABILITIES: [&str; 9] = [
    "saga",
    "signals",
    "search-attributes",
    "priority",
    "child-workflows",
    "schedules",
    "continue-as-new",
    "queries",
    "cancellation",
];

/// The v1 capability baseline as owned names: what a descriptor without a `capabilities` field
/// reads as.
pub fn v1_capabilities() -> Vec<String> {
    V1_CAPABILITIES.iter().map(|c| (*c).to_owned()).collect()
}

impl WorkerDescriptor {
    /// The versions of `workflow` whose turns this worker runs (none when it does not announce
    /// it). A registration states its version; one that states none, or one that is not a
    /// number, and a workflow announced without a registration, count as version 1: the
    /// version a run of a workflow its control plane lacks starts on when nobody says more.
    pub fn turn_versions(&self, workflow: &str) -> Vec<u32> {
        let mut versions: Vec<u32> = self
            .registrations
            .iter()
            .flatten()
            .filter(|r| r.name == workflow)
            .map(|r| {
                r.version
                    .as_deref()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(1)
            })
            .collect();
        if versions.is_empty() && self.workflows.iter().any(|w| w == workflow) {
            versions.push(1);
        }
        versions.sort_unstable();
        versions.dedup();
        versions
    }

    /// The wire's `descriptorHash` (§6.3): FNV-1a-64 over the UTF-16 code units of the
    /// canonical compact JSON, as 16 lowercase hex digits. Every SDK computes the same value.
    pub fn hash(&self) -> String {
        let canonical = self.canonical_json();
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for unit in canonical.encode_utf16() {
            h ^= u64::from(unit & 0xFF);
            h ^= u64::from(unit >> 8);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        format!("{h:016x}")
    }

    /// The canonical form §6.3 hashes: fixed key order, sets sorted and de-duplicated, absent
    /// optionals as `null`, compact.
    fn canonical_json(&self) -> String {
        let s = |v: &str| Value::String(v.to_owned()).to_string();
        let opt = |v: &Option<String>| v.as_deref().map_or_else(|| "null".to_owned(), s);
        let set = |v: &[String]| {
            let mut v = v.to_vec();
            v.sort();
            v.dedup();
            Value::from(v).to_string()
        };
        let mut out = format!(
            "{{\"instanceId\":{},\"runtime\":{},\"sdk\":{{\"name\":{},\"version\":{}}},\
             \"protocol\":{{\"version\":{},\"range\":[{},{}]}},\"capabilities\":{},\
             \"workflows\":{},\"steps\":{}",
            s(&self.instance_id),
            s(&self.runtime),
            s(&self.sdk.name),
            s(&self.sdk.version),
            self.protocol.version,
            self.protocol.range[0],
            self.protocol.range[1],
            set(&self.capabilities),
            set(&self.workflows),
            set(&self.steps),
        );
        if let Some(registrations) = &self.registrations {
            let mut entries: Vec<String> = registrations
                .iter()
                .map(|r| {
                    let mut entry = format!(
                        "{{\"name\":{},\"version\":{},\"group\":{},\"requires\":{},\"origin\":{}",
                        s(&r.name),
                        opt(&r.version),
                        opt(&r.group),
                        r.requires.as_deref().map_or_else(|| "null".to_owned(), set),
                        opt(&r.origin),
                    );
                    if let Some(on_error) = &r.on_error {
                        let mut items: Vec<String> = on_error
                            .iter()
                            .map(|e| {
                                format!(
                                    "{{\"code\":{},\"workflow\":{}}}",
                                    e.get("code").cloned().unwrap_or(Value::Null),
                                    e.get("workflow").cloned().unwrap_or(Value::Null)
                                )
                            })
                            .collect();
                        items.sort();
                        items.dedup();
                        entry.push_str(&format!(",\"onError\":[{}]", items.join(",")));
                    }
                    entry.push('}');
                    entry
                })
                .collect();
            entries.sort();
            entries.dedup();
            out.push_str(&format!(",\"registrations\":[{}]", entries.join(",")));
        }
        out.push_str(&format!(
            ",\"partition\":{},\"namespace\":{},\"startedAt\":{}}}",
            opt(&self.partition),
            opt(&self.namespace),
            self.started_at
        ));
        out
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    // The two descriptors of the aviary wire fixtures (`fixtures/wire/descriptor*.json` in
    // nestjs-durable) and the hashes every SDK computes for them.
    #[test]
    fn golden_descriptor_hashes() {
        let plain: WorkerDescriptor = serde_json::from_value(json!({
            "instanceId": "ts-billing-01-4821", "runtime": "node",
            "sdk": {"name": "@adonis-agora/durable", "version": "1.0.0"},
            "protocol": {"version": 1, "range": [1, 1]},
            "capabilities": ["saga", "signals", "search-attr-v2", "priority"],
            "workflows": ["CheckoutWorkflow", "RefundWorkflow"],
            "steps": ["Billing.charge", "Billing.refund", "Inventory.reserve"],
            "partition": "billing", "namespace": "acme", "startedAt": 1_752_710_400_000_i64
        }))
        .expect("descriptor");
        assert_eq!(plain.hash(), "44c6793c8eb7089f");
        let with_registrations: WorkerDescriptor = serde_json::from_value(json!({
            "instanceId": "py-pipeline-01-7742", "runtime": "python",
            "sdk": {"name": "durable-worker", "version": "0.23.0"},
            "protocol": {"version": 1, "range": [1, 1]},
            "capabilities": ["saga", "signals", "search-attributes", "priority"],
            "workflows": ["extraction", "pipeline"],
            "steps": ["extraction:page"],
            "registrations": [
                {"name": "extraction", "group": "extraction@acme"},
                {"name": "pipeline", "version": "2", "group": "pipeline@acme",
                 "requires": ["saga"], "origin": "flip-python-db"}
            ],
            "partition": "acme", "startedAt": 1_752_710_400_000_i64
        }))
        .expect("descriptor");
        assert_eq!(with_registrations.hash(), "8923307c940a5dde");
    }

    #[test]
    fn the_workflow_versions_a_worker_runs() {
        let d: WorkerDescriptor = serde_json::from_value(json!({
            "instanceId": "x", "runtime": "python",
            "workflows": ["pipeline", "extraction", "legacy", "odd"],
            "registrations": [
                {"name": "pipeline", "version": "2"}, {"name": "pipeline", "version": "3"},
                {"name": "extraction"}, {"name": "odd", "version": "2024-07"}
            ]
        }))
        .expect("descriptor");
        assert_eq!(d.turn_versions("pipeline"), [2, 3]);
        assert_eq!(
            d.turn_versions("extraction"),
            [1],
            "an unstated version is 1"
        );
        assert_eq!(
            d.turn_versions("legacy"),
            [1],
            "announced without a registration"
        );
        assert_eq!(
            d.turn_versions("odd"),
            [1],
            "a version that is not a number"
        );
        assert!(d.turn_versions("billing").is_empty());
    }

    #[test]
    fn missing_fields_read_as_the_wire_defaults() {
        let d: WorkerDescriptor =
            serde_json::from_value(json!({"instanceId": "x", "runtime": "python"}))
                .expect("descriptor");
        assert_eq!(d.protocol, Protocol::default());
        assert_eq!(d.capabilities.len(), V1_CAPABILITIES.len());
        assert_eq!(d.sdk.name, "unknown");
        assert_eq!(d.registrations, None);
        let empty: WorkerDescriptor = serde_json::from_value(
            json!({"instanceId": "x", "runtime": "python", "capabilities": []}),
        )
        .expect("descriptor");
        assert!(empty.capabilities.is_empty());
    }
}
