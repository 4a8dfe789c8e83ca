//! What a hostile or careless client sends, as property-test strategies: any JSON value and any
//! string, with the words our decoders look for mixed in (field names, statuses, command kinds,
//! tenant names), and the strings stores and parsers trip on (NUL, controls, huge numbers,
//! long runs), so that a property reaches real paths and a failure shrinks to a small case.

use proptest::prelude::*;
use serde_json::{Map, Value};

/// Words the wire, the API and the list filters give meaning to.
const WORDS: &[&str] = &[
    "acme",
    "globex",
    "system",
    "default",
    "completed",
    "failed",
    "cancelled",
    "continue",
    "running",
    "suspended",
    "call",
    "recordStep",
    "sleep",
    "waitSignal",
    "startChild",
    "consumeSignal",
    "no_workflow",
    "step",
    "timer",
    "signal",
    "child",
    "run-1",
    "run-1:0",
    "charge",
    "approve",
    "1e400",
    "-1",
    "0",
    "18446744073709551616",
    "NaN",
    "true",
    "null",
];

/// Field names the decoders read.
const KEYS: &[&str] = &[
    "status",
    "commands",
    "kind",
    "seq",
    "name",
    "input",
    "output",
    "error",
    "message",
    "code",
    "retryable",
    "ms",
    "signal",
    "workflow",
    "version",
    "id",
    "runId",
    "taskId",
    "stepId",
    "group",
    "attempt",
    "tags",
    "searchAttributes",
    "payload",
    "namespace",
    "tenant",
    "ts",
    "startedAt",
    "finishedAt",
    "history",
    "pendingSignals",
    "workflowVersion",
    "type",
    "at",
];

/// Any string, leaning towards the ones that matter: [`WORDS`], NUL and control characters,
/// numbers past every integer type, long runs.
pub fn hostile_string() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::sample::select(WORDS).prop_map(str::to_owned),
        3 => any::<String>(),
        2 => "[a-z0-9._@:~=-]{0,16}",
        1 => "[\\x00-\\x1f]{1,4}",
        1 => "[0-9]{18,40}",
        1 => "a{200,3000}",
    ]
}

/// Any JSON value up to a few levels deep, objects keyed mostly by [`KEYS`].
pub fn hostile_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_filter_map("a finite number", |f| {
            serde_json::Number::from_f64(f).map(Value::Number)
        }),
        hostile_string().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((key(), inner), 0..8)
                .prop_map(|fields| Value::Object(fields.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// A JSON object with the fields `keys` (each present or not) set to hostile values, plus a few
/// others: the shape a decoder expects, with every field wrong in its own way.
pub fn wire_object(keys: &'static [&'static str]) -> impl Strategy<Value = Value> {
    let wanted = prop::collection::vec(
        (prop::sample::select(keys), hostile_json()),
        0..keys.len() + 1,
    );
    let others = prop::collection::vec((key(), hostile_json()), 0..3);
    (wanted, others).prop_map(|(wanted, others)| {
        let wanted = wanted.into_iter().map(|(k, v)| (k.to_owned(), v));
        Value::Object(others.into_iter().chain(wanted).collect())
    })
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(KEYS).prop_map(str::to_owned),
        1 => hostile_string(),
    ]
}
