//! Events a program publishes to its tenant (`POST /api/v1/events`), and the filters runs wait
//! for them with (`ctx.wait_event`).

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::update::plain_token;

/// The name an event's delivery takes among a run's signals: `durable.event.<name>`, under the
/// engine's own prefix, so no caller's signal can pass for an event.
pub const EVENT_SIGNAL_PREFIX: &str = "durable.event.";

/// The signal name a wait for event `name` takes its delivery under.
pub fn event_signal(name: &str) -> String {
    format!("{EVENT_SIGNAL_PREFIX}{name}")
}

/// An event's id: publishing again under the same id delivers nothing new and starts nothing
/// new (a publisher that timed out may simply retry).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct EventId(String);

/// The longest event id.
pub const MAX_EVENT_ID_CHARS: usize = 128;

impl EventId {
    /// Checks the shape of an event id: 1 to 128 letters, digits, `_`, `-`, `.` or `:`.
    pub fn parse(raw: &str) -> Result<Self, EventIdError> {
        if plain_token(raw, MAX_EVENT_ID_CHARS) {
            Ok(EventId(raw.to_owned()))
        } else {
            Err(EventIdError(raw.chars().take(140).collect()))
        }
    }

    /// The id as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for EventId {
    type Error = EventIdError;
    fn try_from(raw: String) -> Result<Self, Self::Error> {
        EventId::parse(&raw)
    }
}

impl From<EventId> for String {
    fn from(id: EventId) -> Self {
        id.0
    }
}

impl fmt::Display for EventId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// An event id of the wrong shape.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{0}` is not an event id: use 1 to 128 letters, digits, `_`, `-`, `.` or `:` (or leave it out)"
)]
pub struct EventIdError(pub String);

/// An event as published: a name, a payload, and optionally a key (what waits correlate on: an
/// order id, a customer) and an id (what makes publishing it again harmless).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PublishedEvent {
    /// What happened (`order.paid`).
    pub name: String,
    /// Its data.
    #[serde(default)]
    pub payload: Value,
    /// What it is about, for waits that name one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Its id: published again under it, nothing new happens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<EventId>,
}

/// Which events of a name a wait takes: those with its key (when it names one) whose payload
/// holds every field it names, each equal to the value given. Paths are dotted
/// (`customer.tier`). The empty filter takes every event of the name.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventFilter {
    /// The event's key must be this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Payload fields (dotted paths) and the values they must equal.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub fields: Map<String, Value>,
}

impl EventFilter {
    /// Every event of the name.
    pub fn any() -> Self {
        Self::default()
    }

    /// Events published with key `key`.
    pub fn key(key: impl Into<String>) -> Self {
        EventFilter {
            key: Some(key.into()),
            fields: Map::new(),
        }
    }

    /// Also requires the payload's field at `path` (dotted) to equal `value`.
    pub fn field(mut self, path: &str, value: impl Into<Value>) -> Self {
        self.fields.insert(path.to_owned(), value.into());
        self
    }

    /// Whether `event` passes.
    pub fn matches(&self, event: &PublishedEvent) -> bool {
        if self.key.is_some() && self.key != event.key {
            return false;
        }
        self.fields
            .iter()
            .all(|(path, want)| at_path(&event.payload, path) == Some(want))
    }
}

/// The value at dotted `path` in `value`: object fields by name, array items by index.
fn at_path<'a>(value: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(value, |at, part| match at {
        Value::Object(map) => map.get(part),
        Value::Array(items) => items.get(part.parse::<usize>().ok()?),
        _ => None,
    })
}

/// What publishing an event did.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EventOutcome {
    /// How many waiting runs it reached.
    pub delivered: u32,
    /// The runs the workflows triggered by it started (or had started, for an event published
    /// again under its id).
    pub started: Vec<super::RunId>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(key: Option<&str>, payload: Value) -> PublishedEvent {
        PublishedEvent {
            name: "order.paid".into(),
            payload,
            key: key.map(str::to_owned),
            id: None,
        }
    }

    #[test]
    fn a_filter_takes_events_with_its_key_and_fields() {
        let paid = event(
            Some("o-7"),
            json!({"total": 30, "customer": {"tier": "gold"}}),
        );
        assert!(EventFilter::any().matches(&paid));
        assert!(EventFilter::key("o-7").matches(&paid));
        assert!(!EventFilter::key("o-8").matches(&paid));
        assert!(
            EventFilter::key("o-7")
                .field("customer.tier", "gold")
                .matches(&paid)
        );
        assert!(
            !EventFilter::any()
                .field("customer.tier", "silver")
                .matches(&paid)
        );
        assert!(
            !EventFilter::any()
                .field("customer.name", "ann")
                .matches(&paid)
        );
        assert!(!EventFilter::key("o-7").matches(&event(None, json!({}))));
        let items = event(None, json!({"items": [{"sku": "a"}]}));
        assert!(EventFilter::any().field("items.0.sku", "a").matches(&items));
    }

    #[test]
    fn event_ids_are_plain_tokens() {
        assert!(EventId::parse("evt-1:a.b_c").is_ok());
        assert!(EventId::parse("a b").is_err());
        assert!(EventId::parse("").is_err());
    }
}
