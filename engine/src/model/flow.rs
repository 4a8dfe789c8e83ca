//! Flow control an author declares (SPEC §8): at most N runs of a workflow at once, optionally
//! per key taken from the input ("one charge per customer at a time"), and at most N calls of a
//! step a minute, optionally per key ("100 calls a minute per API account"). Keys come from the
//! input by JSON pointer (RFC 6901), so a limit is data the engine can store and check the same
//! way for Rust and SDK workflows.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::PoolName;

/// The longest key a limit may take from an input: a key is stored and compared, not read.
pub const MAX_FLOW_KEY_CHARS: usize = 200;

/// Where in an input a limit's key is: a JSON pointer such as `/customer/id`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyPointer(String);

impl KeyPointer {
    /// A pointer to `path` (`/customer_id`; a bare `customer_id` gets its leading `/`).
    pub fn new(path: &str) -> Self {
        if path.starts_with('/') || path.is_empty() {
            KeyPointer(path.to_owned())
        } else {
            KeyPointer(format!("/{path}"))
        }
    }

    /// The key `input` holds at `pointer` (`None`: the empty key, one for all inputs).
    fn key_in(pointer: Option<&Self>, input: &Value, what: &str) -> Result<String, String> {
        pointer.map_or_else(|| Ok(String::new()), |p| p.key_of(input, what))
    }

    /// The key `input` holds here: a string as it is, a number or boolean as JSON text. Absent,
    /// null or a structure is refused with what to fix (`what` names the limit's owner).
    pub fn key_of(&self, input: &Value, what: &str) -> Result<String, String> {
        let key = match input.pointer(&self.0) {
            Some(Value::String(s)) => s.clone(),
            Some(v @ (Value::Number(_) | Value::Bool(_))) => v.to_string(),
            Some(Value::Null) | None => {
                return Err(format!(
                    "{what} is limited per `{}` of its input, which this input lacks; add it (a string or a number)",
                    self.0
                ));
            }
            Some(_) => {
                return Err(format!(
                    "{what} is limited per `{}` of its input, which must be a string or a number, not an object or a list",
                    self.0
                ));
            }
        };
        if key.chars().count() > MAX_FLOW_KEY_CHARS || key.contains('\0') {
            return Err(format!(
                "{what} is limited per `{}` of its input: the key must be at most {MAX_FLOW_KEY_CHARS} characters, without U+0000",
                self.0
            ));
        }
        Ok(key)
    }
}

/// At most `limit` runs of one workflow running at once in a tenant, per key when `key` is set
/// (see [`crate::Registry::limit_concurrency`]): a run over it is accepted and waits queued,
/// and starts by itself, in the order it came, when one of its key's runs ends. Or at most
/// `limit` dispatches of one step out at once (see
/// [`crate::runtime::StepOptions::concurrency`]): a call over it waits, its run parked
/// `blocked` with the reason, and is sent when one of its key's dispatches has its result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Concurrency {
    /// How many may run at once.
    pub limit: u32,
    /// Where the key is in the run's input; `None`: one limit for the whole workflow.
    pub key: Option<KeyPointer>,
}

impl Concurrency {
    /// At most `limit` at once (at least 1).
    pub fn at_most(limit: u32) -> Self {
        Concurrency {
            limit: limit.max(1),
            key: None,
        }
    }

    /// The same limit, per value of the input at `pointer` (`/customer_id`).
    pub fn per(mut self, pointer: &str) -> Self {
        self.key = Some(KeyPointer::new(pointer));
        self
    }

    /// The slot a run of `workflow` with `input` takes.
    pub fn slot(&self, workflow: &str, input: &Value) -> Result<ConcurrencySlot, String> {
        let key = KeyPointer::key_in(self.key.as_ref(), input, &format!("workflow `{workflow}`"))?;
        Ok(ConcurrencySlot {
            key,
            limit: self.limit.max(1),
        })
    }
}

impl Concurrency {
    /// The key a call of `step` with `input` is counted under (empty without a pointer).
    pub fn step_key(&self, step: &str, input: &Value) -> Result<String, String> {
        KeyPointer::key_in(self.key.as_ref(), input, &format!("step `{step}`"))
    }

    /// The slots dispatches of `step` under `key` take: their counter among the tenant's
    /// (see [`crate::transport::Slots`]).
    pub fn step_slots(step: &str, key: &str) -> String {
        format!("steps:{step}:{key}")
    }
}

/// The concurrency limit a run was started under, kept with the run: its key (empty for the
/// whole workflow) and the limit in force when it started.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConcurrencySlot {
    /// The key its input gave; empty for a workflow-wide limit.
    pub key: String,
    /// How many runs of its workflow with this key may run at once.
    pub limit: u32,
}

/// At most `per_minute` dispatches of a step in any rolling minute in a tenant, per key when
/// `key` is set (see [`crate::runtime::StepOptions::rate_limit`]). A dispatch over it waits, its run
/// parked `blocked` with the reason, until the allowance has one again; it is never failed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RateLimit {
    /// Dispatches allowed in a minute.
    pub per_minute: u32,
    /// Where the key is in the step's input; `None`: one allowance for the step.
    pub key: Option<KeyPointer>,
}

impl RateLimit {
    /// At most `per_minute` a minute (at least 1).
    pub fn per_minute(per_minute: u32) -> Self {
        RateLimit {
            per_minute: per_minute.max(1),
            key: None,
        }
    }

    /// The same rate, per value of the step input at `pointer`.
    pub fn per(mut self, pointer: &str) -> Self {
        self.key = Some(KeyPointer::new(pointer));
        self
    }

    /// The key a call of `step` with `input` is counted under (empty without a pointer).
    pub fn key(&self, step: &str, input: &Value) -> Result<String, String> {
        KeyPointer::key_in(self.key.as_ref(), input, &format!("step `{step}`"))
    }

    /// The allowance calls of `step` under `key` spend: its name among the tenant's allowances
    /// (see [`crate::transport::RateLimits`]).
    pub fn allowance(step: &str, key: &str) -> String {
        format!("step:{step}:{key}")
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_key_is_read_from_the_input_by_pointer() {
        let by_customer = Concurrency::at_most(2).per("customer/id");
        let slot = by_customer
            .slot("charge", &json!({ "customer": { "id": "c-7" } }))
            .expect("a key");
        assert_eq!(
            slot,
            ConcurrencySlot {
                key: "c-7".into(),
                limit: 2
            }
        );
        let numeric = Concurrency::at_most(1)
            .per("/n")
            .slot("w", &json!({ "n": 42 }));
        assert_eq!(numeric.expect("a number is a key").key, "42");
        assert_eq!(
            Concurrency {
                limit: 0,
                key: None
            }
            .slot("w", &json!(null))
            .expect("no key"),
            ConcurrencySlot {
                key: String::new(),
                limit: 1
            },
            "a limit of 0 would hold every run forever: it is 1"
        );
    }

    #[test]
    fn an_input_without_a_usable_key_is_refused_with_the_fix() {
        let limit = Concurrency::at_most(1).per("/customer");
        for input in [
            json!({}),
            json!({ "customer": null }),
            json!({ "customer": { "id": 1 } }),
            json!({ "customer": "x".repeat(MAX_FLOW_KEY_CHARS + 1) }),
        ] {
            let err = limit.slot("charge", &input).expect_err("refused");
            assert!(err.contains("`/customer`"), "{input}: {err}");
        }
    }

    #[test]
    fn a_step_allowance_is_named_by_step_and_key() {
        let rate = RateLimit::per_minute(100).per("/account");
        let key = rate.key("geocode", &json!({ "account": "a1" }));
        assert_eq!(key.as_deref(), Ok("a1"));
        assert_eq!(RateLimit::allowance("geocode", "a1"), "step:geocode:a1");
        let whole = RateLimit::per_minute(5).key("geocode", &json!(1));
        assert_eq!(whole.as_deref(), Ok(""));
        assert!(rate.key("geocode", &json!({})).is_err());
    }
}

/// How a remote step's dispatches go out: what its worker must be able to do, how often and how
/// many at once it may be sent, and its priority. Declared once with the step's options
/// ([`crate::runtime::StepOptions`]) and carried unchanged by every dispatch of it, first or
/// retried, so a retry is held to the same limits. Every field is an extension the aviary
/// decision omits, so each is skipped when unset.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StepFlow {
    /// Capabilities a worker must advertise to be sent it (wire §6.4).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requires: Vec<String>,
    /// How often it may be dispatched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<RateLimit>,
    /// How many of its dispatches may be out at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<Concurrency>,
    /// Its priority among its step's waiting tasks (the wire's `priority`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i64>,
    /// The pool of the run's tenant its author sent it to, which wins over the tenant's
    /// routing (`StepOptions::pool`, or a worker's `call.group` naming one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<PoolName>,
}
