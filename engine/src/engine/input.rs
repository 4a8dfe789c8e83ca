//! Checks on what callers hand the engine (a start, a signal's payload, a retry's input), made
//! before anything is written or sent. Every entry point (the HTTP API, the dashboard, the wire
//! responder, the CLI) goes through the engine, so they all refuse the same input with the same
//! message, and nothing is half done: a new run's first step may leave while its insert commits
//! (see `crate::driver::turn::first`), so input the store would refuse must never reach that point.

use serde_json::{Map, Value};

use super::EngineError;
use crate::model::{InputLimits, Namespace, RunId};

/// A request to start a top-level run.
#[derive(Clone, Debug, Default)]
pub struct StartRun {
    /// The workflow to run (its newest registered version).
    pub workflow: String,
    /// Its input.
    pub input: Value,
    /// The namespace to stamp; `None` uses the engine's own (or `default` on an operator). A
    /// tenant request passes its verified tenant here, never a value from the request body.
    pub namespace: Option<Namespace>,
    /// A caller-chosen id (idempotency key); a fresh one when `None`.
    pub id: Option<RunId>,
    /// Labels.
    pub tags: Vec<String>,
    /// Search attributes.
    pub search_attributes: Map<String, Value>,
    /// How long the run may take, from its start: past it, it fails (code `run_timeout`)
    /// wherever it waits. At least a second. A retried run has none.
    pub timeout: Option<std::time::Duration>,
}

impl StartRun {
    /// A run timeout as people write it (`30s`, `15m`, `2h`, `1d`), from a form, a flag or a
    /// body; an empty one is none.
    pub fn parse_timeout(raw: &str) -> Result<Option<std::time::Duration>, EngineError> {
        let raw = raw.trim();
        if raw.is_empty() {
            return Ok(None);
        }
        let interval: crate::model::Interval = raw.parse().map_err(|_| {
            bad(format!(
                "`{raw}` is not a timeout: write a number and a unit, like `30s`, `15m`, `2h` or `1d`"
            ))
        })?;
        let ms = u64::try_from(interval.as_millis()).unwrap_or(0);
        Ok(Some(std::time::Duration::from_millis(ms)))
    }
}

/// Refuses a start whose workflow is blank or whose input, tags or search attributes the
/// store could not keep or `limits` do not allow.
pub(super) fn check_start(req: &StartRun, limits: &InputLimits) -> Result<(), EngineError> {
    if req.workflow.trim().is_empty() {
        return Err(bad("`workflow` must name a registered workflow"));
    }
    limits.check_name("the workflow name", &req.workflow)?;
    check_payload(limits, "the input", &req.input)?;
    limits.check_tags(&req.tags)?;
    if req
        .timeout
        .is_some_and(|t| t < std::time::Duration::from_secs(1))
    {
        return Err(bad(
            "a run's timeout must be at least a second (for example `30s` or `2h`)",
        ));
    }
    limits.check_attributes(req.search_attributes.iter())?;
    Ok(())
}

/// Refuses a signal name no wait could match or the store could not keep: blank, with spaces
/// around it, longer than the limit, or holding a control character.
pub(super) fn check_signal_name(limits: &InputLimits, name: &str) -> Result<(), EngineError> {
    if name.is_empty() || name.trim() != name {
        return Err(bad(
            "a signal name must not be blank or have spaces around it; use the name the workflow waits for (for example `approve`)",
        ));
    }
    limits.check_name("the signal name", name)?;
    if name.starts_with("durable.") {
        return Err(bad(format!(
            "signal names under `durable.` are the engine's own (`{name}`); to cancel with compensation, cancel with `compensate: true`"
        )));
    }
    Ok(())
}

/// Refuses `value` (named `what` in the message) if it is larger than `limits` allow, or
/// holds U+0000 in any string or key: PostgreSQL's `jsonb` cannot keep it, so the same input
/// must be refused on every store.
pub(crate) fn check_payload(
    limits: &InputLimits,
    what: &str,
    value: &Value,
) -> Result<(), EngineError> {
    limits.check_payload(what, value)?;
    if holds_nul(value) {
        return Err(bad(format!(
            "{what} contains U+0000 (NUL) in a string or key, which cannot be stored; remove it or encode the bytes (base64, say)"
        )));
    }
    Ok(())
}

/// Refuses a caller's run id of a form the engine derives for runs it starts itself.
pub(super) fn check_chosen_id(req: &StartRun) -> Result<(), EngineError> {
    match &req.id {
        Some(id) if derived(id.as_str()) => Err(bad(format!(
            "run id `{id}` has a form the engine reserves for the runs it starts itself (a child `<run>.child.<n>`, a ContinueAsNew successor `<run>:c<n>`, a dead letter `<run>.dead-letter` or `dlq_…`, an event's `evt_…`); choose another id"
        ))),
        _ => Ok(()),
    }
}

/// Whether `id` has the form of an id the engine derives: a run a caller started under it
/// would be taken for another run's child, successor or dead letter, or would take the id an
/// event's trigger (of any tenant: ids are global) starts its run under.
fn derived(id: &str) -> bool {
    let digits = |n: &str| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit());
    id.rsplit_once(".child.").is_some_and(|(_, n)| digits(n))
        || id.rsplit_once(":c").is_some_and(|(_, n)| digits(n))
        || id.ends_with(".dead-letter")
        || id.starts_with("evt_")
        || id.starts_with("dlq_")
}

fn holds_nul(value: &Value) -> bool {
    match value {
        Value::String(s) => s.contains('\0'),
        Value::Array(items) => items.iter().any(holds_nul),
        Value::Object(map) => map.iter().any(|(k, v)| k.contains('\0') || holds_nul(v)),
        Value::Null | Value::Bool(_) | Value::Number(_) => false,
    }
}

fn bad(message: impl Into<String>) -> EngineError {
    EngineError::BadInput(message.into())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn check_start_default(req: &StartRun) -> Result<(), EngineError> {
        check_start(req, &InputLimits::default())
    }

    fn start(input: Value) -> StartRun {
        StartRun {
            workflow: "w".into(),
            input,
            ..StartRun::default()
        }
    }

    #[test]
    fn refuses_nul_anywhere_the_store_would() {
        assert!(check_start_default(&start(json!({ "a": ["ok", 1, null] }))).is_ok());
        for input in [
            json!("a\u{0}b"),
            json!({ "deep": [{ "x": "\u{0}" }] }),
            json!({ "k\u{0}": 1 }),
        ] {
            let err = check_start_default(&start(input.clone())).expect_err("refused");
            assert!(err.to_string().contains("U+0000"), "{input}: {err}");
        }
        let mut tagged = start(json!({}));
        tagged.tags = vec!["a\u{0}".into()];
        assert!(check_start_default(&tagged).is_err());
    }

    #[test]
    fn refuses_signal_names_no_wait_could_match() {
        let limits = InputLimits::default();
        assert!(check_signal_name(&limits, "approve").is_ok());
        for name in ["", " approve", "approve ", "a\u{0}", &"x".repeat(201)] {
            assert!(check_signal_name(&limits, name).is_err(), "{name:?}");
        }
    }

    #[test]
    fn refuses_ids_the_engine_derives() {
        for (id, refused) in [
            ("run_a.child.3", true),
            ("run_a:c12", true),
            ("run_a", false),
            ("order:c", false),
            ("order:cx1", false),
            ("my.child-run", false),
            ("my.child.profile", false),
            ("run_a.child.3.child.1", true),
            ("run_a.dead-letter", true),
            ("evt_0123", true),
            ("dlq_0123", true),
            ("event_1", false),
        ] {
            let mut req = start(json!({}));
            req.id = Some(crate::model::RunId::parse(id).expect("id"));
            assert_eq!(check_chosen_id(&req).is_err(), refused, "{id}");
        }
    }

    #[test]
    fn refuses_blank_workflows_and_nested_attributes() {
        let mut blank = start(json!({}));
        blank.workflow = "  ".into();
        assert!(check_start_default(&blank).is_err());
        let mut nested = start(json!({}));
        nested.search_attributes = json!({ "a": { "x": 1 } })
            .as_object()
            .cloned()
            .unwrap_or_default();
        let err = check_start_default(&nested).expect_err("nested");
        assert!(err.to_string().contains("search attribute `a`"), "{err}");
        let mut flat = start(json!({}));
        flat.search_attributes = json!({ "a": 1, "b": "x", "c": true, "d": null })
            .as_object()
            .cloned()
            .unwrap_or_default();
        assert!(check_start_default(&flat).is_ok());
    }
}
