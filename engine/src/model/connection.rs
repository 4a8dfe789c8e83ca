//! A tenant's connections: named settings a step uses to reach a downstream service (`http`: a
//! base URL, headers, and secret headers such as `Authorization`), or a named set of secret
//! values (`secret`). A step receives one through its context, never through its input, so its
//! secrets stay out of checkpoints, exports and traces; the fields that are not secret are
//! readable by the tenant, the secret ones are write-only (a read says which are set, and when).

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::{Millis, Namespace};

/// The most headers, and separately the most secret fields, one connection holds.
pub const MAX_CONNECTION_FIELDS: usize = 32;
/// The longest base URL, in bytes.
pub const MAX_BASE_URL_BYTES: usize = 2048;
/// The longest header or secret value, in bytes.
pub const MAX_FIELD_VALUE_BYTES: usize = 8192;
/// The longest header or secret field name, in characters.
pub const MAX_FIELD_NAME_CHARS: usize = 64;

/// Headers a connection may not set: the HTTP client owns them.
const CLIENT_HEADERS: [&str; 6] = [
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "upgrade",
    "te",
];

/// A connection's name within its tenant.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ConnectionName(String);

impl ConnectionName {
    /// Checks a connection name taken from a URL, a form, a flag, a step's code or a stored row:
    /// 1 to 63 lowercase letters, digits, `_` and `-`, as a pool's.
    pub fn parse(raw: &str) -> Result<Self, ConnectionError> {
        if !raw.is_empty() && Namespace::parse(raw).is_ok() {
            Ok(ConnectionName(raw.to_owned()))
        } else {
            Err(ConnectionError::Name(raw.chars().take(64).collect()))
        }
    }

    /// The name as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ConnectionName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for ConnectionName {
    type Error = ConnectionError;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        ConnectionName::parse(&value)
    }
}

impl From<ConnectionName> for String {
    fn from(value: ConnectionName) -> Self {
        value.0
    }
}

/// What a connection is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ConnectionKind {
    /// A downstream HTTP API: base URL, headers, secret headers (the `durable.http` step's).
    Http,
    /// Named secret values a step's code reads.
    Secret,
}

impl ConnectionKind {
    /// The kind's name, as the API spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            ConnectionKind::Http => "http",
            ConnectionKind::Secret => "secret",
        }
    }
}

/// What an admin sends to create a connection or change one (`PUT /api/v1/connections/{name}`).
/// Secret fields are merged into what is stored: a value sets the field, `null` removes it,
/// and a field not named keeps its value, so a change of the base URL needs no secret again.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConnectionSpec {
    /// What it is for; a stored connection keeps its kind.
    pub kind: ConnectionKind,
    /// `http`: where the paths of its calls are resolved (`https://api.stripe.com/v1/`). Not
    /// secret: it is shown to the tenant's viewers; keep keys out of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// `http`: headers sent on every call, readable.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// `http`: headers sent on every call, write-only (`Authorization`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub secret_headers: BTreeMap<String, Option<String>>,
    /// `secret`: named values, write-only.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub values: BTreeMap<String, Option<String>>,
}

impl fmt::Debug for ConnectionSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnectionSpec")
            .field("kind", &self.kind)
            .field("base_url", &self.base_url)
            .field("headers", &self.headers)
            .field("secret_headers", &self.secret_headers.keys())
            .field("values", &self.values.keys())
            .finish()
    }
}

impl ConnectionSpec {
    /// Reads a spec from JSON. The error says where and what is wrong but quotes no value of
    /// the input (serde's own messages may quote one, and that one may be a secret).
    pub fn from_json(json: &[u8]) -> Result<Self, String> {
        serde_json::from_slice(json).map_err(|e| {
            let mut message = String::new();
            let mut quoted = false;
            for c in e.to_string().chars() {
                match (c, quoted) {
                    ('"', false) => {
                        quoted = true;
                        message.push_str("\"…");
                    }
                    ('"', true) => {
                        quoted = false;
                        message.push('"');
                    }
                    (_, true) => {}
                    (c, false) => message.push(c),
                }
            }
            format!("invalid connection: {message}")
        })
    }

    /// The secret fields it sets or removes, whichever its kind names them by.
    pub fn secret_changes(&self) -> &BTreeMap<String, Option<String>> {
        match self.kind {
            ConnectionKind::Http => &self.secret_headers,
            ConnectionKind::Secret => &self.values,
        }
    }

    /// Checks everything a connection can be refused for without its stored state: the
    /// fields its kind takes, names, sizes, control characters, and that the base URL is an
    /// absolute `http` or `https` URL (the engine parses it again before any call).
    pub fn check(&self) -> Result<(), ConnectionError> {
        match self.kind {
            ConnectionKind::Http => {
                if !self.values.is_empty() {
                    return Err(ConnectionError::Field {
                        field: "values",
                        kind: self.kind,
                    });
                }
                let url = self
                    .base_url
                    .as_deref()
                    .ok_or(ConnectionError::BaseUrlMissing)?;
                check_base_url(url)?;
                check_fields(&self.headers, true)?;
                check_secret_fields(&self.secret_headers, true)?;
                for name in self.secret_headers.keys() {
                    if self.headers.keys().any(|h| h.eq_ignore_ascii_case(name)) {
                        return Err(ConnectionError::Twice(name.clone()));
                    }
                }
            }
            ConnectionKind::Secret => {
                for (field, set) in [
                    ("base_url", self.base_url.is_some()),
                    ("headers", !self.headers.is_empty()),
                    ("secret_headers", !self.secret_headers.is_empty()),
                ] {
                    if set {
                        return Err(ConnectionError::Field {
                            field,
                            kind: self.kind,
                        });
                    }
                }
                check_secret_fields(&self.values, false)?;
            }
        }
        Ok(())
    }
}

fn check_base_url(url: &str) -> Result<(), ConnectionError> {
    let lower = url.to_ascii_lowercase();
    let scheme_ok = lower.starts_with("https://") || lower.starts_with("http://");
    let host_ok = url
        .split_once("://")
        .map(|(_, rest)| rest.split(['/', '?', '#']).next().unwrap_or(""))
        .is_some_and(|authority| !authority.is_empty() && !authority.contains('@'));
    if url.len() > MAX_BASE_URL_BYTES
        || !scheme_ok
        || !host_ok
        || url.chars().any(|c| c.is_control() || c.is_whitespace())
    {
        return Err(ConnectionError::BaseUrl(url.chars().take(200).collect()));
    }
    Ok(())
}

fn check_name(name: &str, header: bool) -> Result<(), ConnectionError> {
    let ok = !name.is_empty()
        && name.chars().count() <= MAX_FIELD_NAME_CHARS
        && if header {
            // An HTTP token (RFC 9110 §5.6.2).
            name.chars()
                .all(|c| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c))
        } else {
            name.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        };
    if !ok {
        return Err(ConnectionError::FieldName(name.chars().take(64).collect()));
    }
    if header && CLIENT_HEADERS.contains(&name.to_ascii_lowercase().as_str()) {
        return Err(ConnectionError::ClientHeader(name.to_owned()));
    }
    Ok(())
}

fn check_value(name: &str, value: &str, header: bool) -> Result<(), ConnectionError> {
    let bad_char = if header {
        // A header value is visible ASCII and spaces: no line breaks to smuggle a header in.
        value.chars().any(|c| c.is_control() && c != '\t')
    } else {
        value.contains('\0')
    };
    if value.len() > MAX_FIELD_VALUE_BYTES || bad_char {
        return Err(ConnectionError::Value(name.to_owned()));
    }
    Ok(())
}

/// Checks one header a step adds to a call: a token name the HTTP client does not own, and a
/// value without line breaks or control characters.
pub fn check_header(name: &str, value: &str) -> Result<(), ConnectionError> {
    check_name(name, true)?;
    check_value(name, value, true)
}

fn check_fields(fields: &BTreeMap<String, String>, header: bool) -> Result<(), ConnectionError> {
    if fields.len() > MAX_CONNECTION_FIELDS {
        return Err(ConnectionError::TooMany(fields.len()));
    }
    for (name, value) in fields {
        check_name(name, header)?;
        check_value(name, value, header)?;
    }
    Ok(())
}

fn check_secret_fields(
    fields: &BTreeMap<String, Option<String>>,
    header: bool,
) -> Result<(), ConnectionError> {
    if fields.len() > MAX_CONNECTION_FIELDS {
        return Err(ConnectionError::TooMany(fields.len()));
    }
    for (name, value) in fields {
        check_name(name, header)?;
        if let Some(value) = value {
            if value.is_empty() {
                return Err(ConnectionError::EmptySecret(name.clone()));
            }
            check_value(name, value, header)?;
        }
    }
    Ok(())
}

/// When a secret field was set: what a read says of it instead of its value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecretField {
    /// Always true: the field is set (a removed one is not listed).
    pub set: bool,
    /// When its value was last written.
    pub set_at: Millis,
}

/// A connection as its tenant reads it: every field but the secret values.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectionInfo {
    /// Its name.
    pub name: ConnectionName,
    /// What it is for.
    pub kind: ConnectionKind,
    /// `http`: the base URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// `http`: the readable headers.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// The secret fields that are set (secret headers, or values), without their values.
    #[serde(default)]
    pub secrets: BTreeMap<String, SecretField>,
    /// When it was created.
    pub created_at: Millis,
    /// When it was last changed.
    pub updated_at: Millis,
}

/// A connection as a step receives it, secrets included. It is neither serialized nor shown
/// in full by `Debug`, so it does not end up in a checkpoint or a log line by accident.
#[derive(Clone, PartialEq, Eq)]
pub struct Connection {
    /// Its name.
    pub name: ConnectionName,
    /// What it is for.
    pub kind: ConnectionKind,
    /// `http`: the base URL.
    pub base_url: Option<String>,
    /// `http`: the readable headers.
    pub headers: BTreeMap<String, String>,
    secrets: BTreeMap<String, String>,
}

impl fmt::Debug for Connection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connection")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .field("base_url", &self.base_url)
            .field("headers", &self.headers)
            .field("secrets", &self.secrets.keys())
            .finish()
    }
}

impl Connection {
    /// A connection with its secret fields (secret headers for `http`, values for `secret`).
    pub fn new(
        name: ConnectionName,
        kind: ConnectionKind,
        base_url: Option<String>,
        headers: BTreeMap<String, String>,
        secrets: BTreeMap<String, String>,
    ) -> Self {
        Connection {
            name,
            kind,
            base_url,
            headers,
            secrets,
        }
    }

    /// Secret field `name`: a `secret` connection's value, or an `http` one's secret header.
    pub fn secret(&self, name: &str) -> Option<&str> {
        self.secrets.get(name).map(String::as_str)
    }

    /// Every secret field, by name.
    pub fn secrets(&self) -> impl Iterator<Item = (&str, &str)> {
        self.secrets.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }
}

/// Why a connection or its name was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConnectionError {
    /// The name breaks the naming rules.
    #[error(
        "connection name `{0}` is invalid: use 1 to 63 lowercase letters, digits, `_` and `-`, starting with a letter or digit"
    )]
    Name(String),
    /// A field the kind does not take.
    #[error("a `{}` connection has no `{field}`: remove it, or use the kind that has it", kind.as_str())]
    Field {
        /// The field given.
        field: &'static str,
        /// The connection's kind.
        kind: ConnectionKind,
    },
    /// An `http` connection without its base URL.
    #[error("an `http` connection needs a `base_url` such as `https://api.example.com/v1/`")]
    BaseUrlMissing,
    /// The base URL is not an absolute `http(s)` URL.
    #[error(
        "base_url `{0}` is invalid: give an absolute http:// or https:// URL with a host, no credentials in it, at most {MAX_BASE_URL_BYTES} bytes"
    )]
    BaseUrl(String),
    /// Too many headers or secret fields.
    #[error("{0} fields given; a connection holds at most {MAX_CONNECTION_FIELDS} of each kind")]
    TooMany(usize),
    /// A header or field name breaks the rules.
    #[error(
        "field name `{0}` is invalid: use 1 to {MAX_FIELD_NAME_CHARS} letters, digits and `-`, `_` or `.`"
    )]
    FieldName(String),
    /// A header the HTTP client sets itself.
    #[error("header `{0}` is set by the HTTP client itself and cannot be part of a connection")]
    ClientHeader(String),
    /// A header named both readable and secret.
    #[error("header `{0}` is given both in `headers` and in `secret_headers`: keep one")]
    Twice(String),
    /// A value too long, or with a character it may not hold.
    #[error(
        "the value of `{0}` is longer than {MAX_FIELD_VALUE_BYTES} bytes or holds a line break or control character"
    )]
    Value(String),
    /// An empty secret: `null` removes a field.
    #[error("secret `{0}` is empty: give a value, or `null` to remove it")]
    EmptySecret(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn http(base_url: &str) -> ConnectionSpec {
        ConnectionSpec {
            kind: ConnectionKind::Http,
            base_url: Some(base_url.into()),
            headers: BTreeMap::new(),
            secret_headers: BTreeMap::from([("Authorization".into(), Some("Bearer sk".into()))]),
            values: BTreeMap::new(),
        }
    }

    #[test]
    fn an_http_connection_takes_a_base_url_and_headers_and_refuses_what_it_cannot_send() {
        assert_eq!(http("https://api.example.com/v1/").check(), Ok(()));
        for bad in [
            "ftp://x",
            "https://",
            "https://user:pw@host/",
            "https://a b/",
            "/relative",
        ] {
            assert!(
                matches!(http(bad).check(), Err(ConnectionError::BaseUrl(_))),
                "{bad}"
            );
        }
        let mut spec = http("https://a/");
        spec.headers.insert("Host".into(), "evil".into());
        assert_eq!(
            spec.check(),
            Err(ConnectionError::ClientHeader("Host".into()))
        );
        let mut spec = http("https://a/");
        spec.headers
            .insert("X-A".into(), "one\r\nX-Injected: two".into());
        assert_eq!(spec.check(), Err(ConnectionError::Value("X-A".into())));
        let mut spec = http("https://a/");
        spec.headers.insert("authorization".into(), "x".into());
        assert_eq!(
            spec.check(),
            Err(ConnectionError::Twice("Authorization".into()))
        );
        let mut spec = http("https://a/");
        spec.values.insert("k".into(), Some("v".into()));
        assert!(matches!(
            spec.check(),
            Err(ConnectionError::Field {
                field: "values",
                ..
            })
        ));
    }

    #[test]
    fn a_secret_connection_holds_values_only_and_its_debug_shows_none_of_them() {
        let spec = ConnectionSpec {
            kind: ConnectionKind::Secret,
            base_url: None,
            headers: BTreeMap::new(),
            secret_headers: BTreeMap::new(),
            values: BTreeMap::from([
                ("api_key".into(), Some("s3cr3t-value".into())),
                ("old".into(), None),
            ]),
        };
        assert_eq!(spec.check(), Ok(()));
        assert!(!format!("{spec:?}").contains("s3cr3t"));
        let connection = Connection::new(
            ConnectionName::parse("stripe").unwrap(),
            ConnectionKind::Secret,
            None,
            BTreeMap::new(),
            BTreeMap::from([("api_key".into(), "s3cr3t-value".into())]),
        );
        assert_eq!(connection.secret("api_key"), Some("s3cr3t-value"));
        assert!(!format!("{connection:?}").contains("s3cr3t"));
        let mut empty = spec.clone();
        empty.values.insert("blank".into(), Some(String::new()));
        assert_eq!(
            empty.check(),
            Err(ConnectionError::EmptySecret("blank".into()))
        );
        assert!(ConnectionName::parse("Bad Name").is_err());
        let refused = ConnectionSpec::from_json(br#"{"kind": "secret", "values": "sk_live_typo"}"#)
            .unwrap_err();
        assert!(!refused.contains("sk_live"), "{refused}");
        assert!(refused.contains("expected a map"), "{refused}");
        let unknown =
            ConnectionSpec::from_json(br#"{"kind": "http", "secret_header": {}}"#).unwrap_err();
        assert!(unknown.contains("secret_header"), "{unknown}");
    }
}
