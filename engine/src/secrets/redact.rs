//! Redaction of secret values from what a step hands back: a step that read a connection may
//! echo one of its secrets in its output or its error (a downstream API that repeats the
//! `Authorization` header it got, a handler that logs its config into an error). Before such a
//! result is kept, every occurrence of every secret the step received is replaced, and so is
//! the credential of a value written `<scheme> <credential>` (`Bearer sk_…`), which an API
//! may echo without its scheme.
//!
//! What it cannot catch: a secret transformed before it is echoed (encoded in base64 or as
//! URL escapes, hashed, split, cased differently, or only partly repeated), and secrets shorter
//! than [`MIN_REDACTED_CHARS`] characters, which are left alone because replacing them would
//! mangle ordinary text.

use serde_json::Value;

/// What a secret is replaced with.
pub const REDACTED: &str = "[redacted]";

/// Secrets shorter than this are not looked for.
pub const MIN_REDACTED_CHARS: usize = 6;

/// The secret values a step received, longest first (so a secret that contains another is
/// replaced whole).
#[derive(Clone, Default)]
pub struct Redactor {
    secrets: Vec<String>,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Redactor({} secrets)", self.secrets.len())
    }
}

impl Redactor {
    /// Adds secret values to look for (and each one's credential after its scheme).
    pub fn add<'a>(&mut self, secrets: impl IntoIterator<Item = &'a str>) {
        for secret in secrets {
            let credential = secret.split_once(' ').map(|(_, c)| c.trim());
            for value in std::iter::once(secret).chain(credential) {
                if value.chars().count() >= MIN_REDACTED_CHARS
                    && !self.secrets.iter().any(|s| s == value)
                {
                    self.secrets.push(value.to_owned());
                }
            }
        }
        self.secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    }

    /// Whether there is nothing to look for.
    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// `text` with every secret replaced.
    pub fn text(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for secret in &self.secrets {
            if out.contains(secret.as_str()) {
                out = out.replace(secret.as_str(), REDACTED);
            }
        }
        out
    }

    /// Replaces every secret in every string of `value`, keys included.
    pub fn value(&self, value: &mut Value) {
        if self.secrets.is_empty() {
            return;
        }
        match value {
            Value::String(s) => {
                if self
                    .secrets
                    .iter()
                    .any(|secret| s.contains(secret.as_str()))
                {
                    *s = self.text(s);
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|v| self.value(v)),
            Value::Object(map) => {
                let taken = std::mem::take(map);
                for (key, mut item) in taken {
                    self.value(&mut item);
                    map.insert(self.text(&key), item);
                }
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn every_echo_of_a_secret_is_replaced_wherever_it_sits() {
        let mut redactor = Redactor::default();
        redactor.add(["sk_live_abcdef", "abc", "Bearer sk_live_abcdef"]);
        let mut value = json!({
            "echo": {"authorization": "Bearer sk_live_abcdef"},
            "list": ["x sk_live_abcdef y", 3, null],
            "sk_live_abcdef": true,
            "short": "abc stays",
        });
        redactor.value(&mut value);
        assert_eq!(
            value,
            json!({
                "echo": {"authorization": "[redacted]"},
                "list": ["x [redacted] y", 3, null],
                "[redacted]": true,
                "short": "abc stays",
            })
        );
        assert_eq!(
            redactor.text("failed with sk_live_abcdef"),
            "failed with [redacted]"
        );
        let mut schemed = Redactor::default();
        schemed.add(["Bearer tok_123456789"]);
        assert_eq!(
            schemed.text("header Bearer tok_123456789, token tok_123456789"),
            "header [redacted], token [redacted]"
        );
    }
}
