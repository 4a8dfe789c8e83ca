//! What one request may carry, whoever sends it: the HTTP API, the dashboard, the wire and the
//! CLI all reach the engine, which checks every start, signal, retry and list filter against
//! one [`InputLimits`] before any store is asked. A store keeps what it is given for as long as
//! the run lives and serves one writer at a time, so a start with 60,000 tags or a 100 MB
//! payload costs every other tenant; these limits bound what one request can cost, and a
//! tenant's plan may lower the payload limit further.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The bounds every request is checked against; each is configurable on the server
/// (`durable serve --help`), and each refusal names the bound it broke.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputLimits {
    /// The largest input, signal payload or retry input, in bytes of JSON.
    pub max_payload_bytes: usize,
    /// The most tags one run carries.
    pub max_tags: usize,
    /// The longest tag, in characters.
    pub max_tag_chars: usize,
    /// The most search attributes one run carries.
    pub max_attributes: usize,
    /// The longest search-attribute string value, in characters.
    pub max_attribute_value_chars: usize,
    /// The longest workflow or signal name, in characters.
    pub max_name_chars: usize,
    /// The most schedules one tenant keeps: every one is looked at by every control plane.
    pub max_schedules: usize,
}

impl Default for InputLimits {
    fn default() -> Self {
        InputLimits {
            max_payload_bytes: 1 << 20,
            max_tags: 64,
            max_tag_chars: 128,
            max_attributes: 32,
            max_attribute_value_chars: 1024,
            max_name_chars: 200,
            max_schedules: 1_000,
        }
    }
}

/// Why a request's input was refused: the bound it broke, in words that name the fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InputError {
    /// A text holds a character no store keeps (U+0000) or that no name may hold.
    #[error(
        "{what} contains a control character (such as U+0000), which cannot be stored; remove it"
    )]
    ControlCharacter {
        /// What the text is (`tag "a…"`, `the workflow filter`).
        what: String,
    },
    /// A text is longer than its limit.
    #[error("{what} is {chars} characters long; the limit is {limit} (max_{field})")]
    TooLong {
        /// What the text is.
        what: String,
        /// Its length.
        chars: usize,
        /// The limit.
        limit: usize,
        /// The limit's name in [`InputLimits`], without `max_`.
        field: &'static str,
    },
    /// A search attribute whose name no store can index.
    #[error(
        "search attribute `{0}` is not a valid name: use letters, digits, `_`, `-` or `.` (at most 64)"
    )]
    AttributeName(String),
    /// A search attribute whose value is a list or an object: attributes are flat, so they can
    /// be filtered and compared.
    #[error("search attribute `{0}` must be a string, number, boolean or null")]
    AttributeNotFlat(String),
    /// Too many of something.
    #[error("{count} {what} given; the limit is {limit} (max_{what})")]
    TooMany {
        /// What is counted (`tags`, `attributes`).
        what: &'static str,
        /// How many were given.
        count: usize,
        /// The limit.
        limit: usize,
    },
    /// A payload larger than the limit.
    #[error("{what} is {bytes} bytes of JSON; the limit is {limit} (max_payload_bytes)")]
    PayloadTooLarge {
        /// What the payload is (`the input`, `the signal's payload`).
        what: String,
        /// Its size.
        bytes: usize,
        /// The limit.
        limit: usize,
    },
}

/// Whether `key` can name a search attribute a store indexes: 1 to 64 letters, digits, `_`, `-`
/// or `.`.
pub fn is_attribute_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= 64
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

impl InputLimits {
    /// Refuses `text` (described by `what`) when it holds a control character or is longer
    /// than `limit` characters (`field` names the limit).
    pub fn check_text(
        what: impl Fn() -> String,
        text: &str,
        limit: usize,
        field: &'static str,
    ) -> Result<(), InputError> {
        if text.chars().any(char::is_control) {
            return Err(InputError::ControlCharacter { what: what() });
        }
        let chars = text.chars().count();
        if chars > limit {
            return Err(InputError::TooLong {
                what: what(),
                chars,
                limit,
                field,
            });
        }
        Ok(())
    }

    /// Refuses a workflow or signal name that is too long or holds a control character.
    pub fn check_name(&self, what: &str, name: &str) -> Result<(), InputError> {
        Self::check_text(|| what.to_owned(), name, self.max_name_chars, "name_chars")
    }

    /// Refuses more tags than [`InputLimits::max_tags`] or any tag that is too long or holds a
    /// control character.
    pub fn check_tags(&self, tags: &[String]) -> Result<(), InputError> {
        if tags.len() > self.max_tags {
            return Err(InputError::TooMany {
                what: "tags",
                count: tags.len(),
                limit: self.max_tags,
            });
        }
        for tag in tags {
            Self::check_text(
                || describe("tag", tag),
                tag,
                self.max_tag_chars,
                "tag_chars",
            )?;
        }
        Ok(())
    }

    /// Refuses more search attributes than [`InputLimits::max_attributes`], a name no store
    /// can index ([`is_attribute_key`]), a list or object value, or a string value that is too
    /// long or holds a control character.
    pub fn check_attributes<'a>(
        &self,
        attributes: impl ExactSizeIterator<Item = (&'a String, &'a Value)>,
    ) -> Result<(), InputError> {
        if attributes.len() > self.max_attributes {
            return Err(InputError::TooMany {
                what: "attributes",
                count: attributes.len(),
                limit: self.max_attributes,
            });
        }
        for (key, value) in attributes {
            if !is_attribute_key(key) {
                return Err(InputError::AttributeName(key.chars().take(64).collect()));
            }
            match value {
                Value::String(text) => self.check_attribute_value(key, text)?,
                Value::Array(_) | Value::Object(_) => {
                    return Err(InputError::AttributeNotFlat(key.clone()));
                }
                Value::Null | Value::Bool(_) | Value::Number(_) => {}
            }
        }
        Ok(())
    }

    /// Refuses a search-attribute string value (of attribute `key`) that is too long or holds a
    /// control character: in a run, and in a filter.
    pub fn check_attribute_value(&self, key: &str, text: &str) -> Result<(), InputError> {
        Self::check_text(
            || format!("the value of search attribute `{key}`"),
            text,
            self.max_attribute_value_chars,
            "attribute_value_chars",
        )
    }

    /// Refuses a payload (named `what`) of more than [`InputLimits::max_payload_bytes`] of JSON.
    pub fn check_payload(&self, what: &str, payload: &Value) -> Result<(), InputError> {
        let bytes = json_size(payload);
        if bytes > self.max_payload_bytes {
            return Err(InputError::PayloadTooLarge {
                what: what.to_owned(),
                bytes,
                limit: self.max_payload_bytes,
            });
        }
        Ok(())
    }
}

/// `what "text"`, with a long text cut, for a message.
fn describe(what: &str, text: &str) -> String {
    let shown: String = text.chars().take(40).collect();
    if shown.len() < text.len() {
        format!("{what} {shown:?}…")
    } else {
        format!("{what} {shown:?}")
    }
}

/// The size of `value` as compact JSON, counted without building the string.
fn json_size(value: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing to a counter cannot fail, and a `Value` always serialises.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn each_refusal_names_its_limit() {
        let limits = InputLimits::default();
        let many: Vec<String> = (0..60_000).map(|n| format!("t{n}")).collect();
        let err = limits.check_tags(&many).expect_err("too many");
        assert!(err.to_string().contains("max_tags"), "{err}");
        let err = limits.check_tags(&["x".repeat(129)]).expect_err("too long");
        assert!(err.to_string().contains("max_tag_chars"), "{err}");
        let err = limits.check_tags(&["a\u{0}b".into()]).expect_err("nul");
        assert!(err.to_string().contains("U+0000"), "{err}");
        assert!(limits.check_tags(&["ok".into(), "x".repeat(128)]).is_ok());

        let big = json!({ "blob": "x".repeat(1 << 20) });
        let err = limits.check_payload("the input", &big).expect_err("big");
        assert!(err.to_string().contains("max_payload_bytes"), "{err}");
        assert!(
            limits
                .check_payload("the input", &json!({ "a": 1 }))
                .is_ok()
        );

        let attrs = json!({ "region": "x".repeat(1025) });
        let map = attrs.as_object().expect("object");
        let err = limits.check_attributes(map.iter()).expect_err("long value");
        assert!(
            err.to_string().contains("max_attribute_value_chars"),
            "{err}"
        );
        let err = limits
            .check_name("the workflow", "a\nb")
            .expect_err("control");
        assert!(err.to_string().contains("the workflow"), "{err}");
    }

    #[test]
    fn json_size_is_the_compact_encoding() {
        let value = json!({ "a": [1, "two", null], "é": true });
        assert_eq!(json_size(&value), value.to_string().len());
    }
}
