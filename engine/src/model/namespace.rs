use std::fmt;

use serde::{Deserialize, Serialize};

/// The tenant word on the store side: which runs a control plane polls and whose runs a reader
/// may see.
///
/// A stored namespace is never empty: unset or `""` becomes [`Namespace::DEFAULT`]. Tenant names
/// are lowercase `[a-z0-9][a-z0-9_-]{0,62}`; `@`, `:` and `.` would break routing tokens and are
/// rejected, as are the reserved words `default` and `system` when a *tenant* is named.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Namespace(String);

/// Why a tenant or namespace name was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NamespaceError {
    /// The name is longer than 63 characters.
    #[error("tenant name `{0}` is longer than 63 characters")]
    TooLong(String),
    /// The name contains a character outside `[a-z0-9_-]` or does not start with `[a-z0-9]`.
    #[error(
        "tenant name `{0}` is invalid: use lowercase letters, digits, `_` and `-`, starting with a letter or digit (no `@`, `:` or `.`)"
    )]
    Invalid(String),
    /// `default` and `system` cannot name a tenant.
    #[error("tenant name `{0}` is reserved; pick another name")]
    Reserved(String),
}

impl Namespace {
    /// The namespace of runs started without one.
    pub const DEFAULT_NAME: &'static str = "default";
    /// The reserved namespace of engine-internal work.
    pub const SYSTEM_NAME: &'static str = "system";

    /// The `default` namespace.
    pub fn default_ns() -> Self {
        Namespace(Self::DEFAULT_NAME.to_owned())
    }

    /// The reserved `system` namespace: engine-internal work runs in its own lane under it,
    /// never behind a tenant's backlog and against no tenant's plan.
    pub fn system() -> Self {
        Namespace(Self::SYSTEM_NAME.to_owned())
    }

    /// Parses a stored or configured namespace: `""` is `default`; anything else must be a valid
    /// name (reserved words are allowed here, since `default` is a real namespace).
    pub fn parse(raw: &str) -> Result<Self, NamespaceError> {
        if raw.is_empty() {
            return Ok(Self::default_ns());
        }
        validate_shape(raw)?;
        Ok(Namespace(raw.to_owned()))
    }

    /// Parses the name of a *tenant*: like [`Namespace::parse`] but `""`, `default` and `system`
    /// are refused, because a tenant must be a real, distinct word.
    pub fn tenant(raw: &str) -> Result<Self, NamespaceError> {
        validate_shape(raw)?;
        if raw == Self::DEFAULT_NAME || raw == Self::SYSTEM_NAME {
            return Err(NamespaceError::Reserved(raw.to_owned()));
        }
        Ok(Namespace(raw.to_owned()))
    }

    /// Reads a namespace column: legacy `NULL` or `""` rows read back as `default`.
    pub fn from_stored(raw: Option<&str>) -> Self {
        match raw {
            None | Some("") => Self::default_ns(),
            Some(s) => Namespace(s.to_owned()),
        }
    }

    /// The name as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether this is the `default` namespace (which routes to bare, unsuffixed queues).
    pub fn is_default(&self) -> bool {
        self.0 == Self::DEFAULT_NAME
    }
}

fn validate_shape(raw: &str) -> Result<(), NamespaceError> {
    if raw.len() > 63 {
        return Err(NamespaceError::TooLong(raw.to_owned()));
    }
    let mut chars = raw.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    let rest_ok =
        chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
    if first_ok && rest_ok {
        Ok(())
    } else {
        Err(NamespaceError::Invalid(raw.to_owned()))
    }
}

impl Default for Namespace {
    fn default() -> Self {
        Self::default_ns()
    }
}

impl fmt::Display for Namespace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for Namespace {
    type Error = NamespaceError;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        Namespace::parse(&value)
    }
}

impl From<Namespace> for String {
    fn from(value: Namespace) -> Self {
        value.0
    }
}

/// Which namespaces a read may see. Every read path of a store takes one, so "forgot to filter"
/// cannot be written: [`Scope::All`] is the operator's explicit choice, never an accident.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Scope {
    /// Every namespace (an operator).
    All,
    /// Only this namespace.
    Only(Namespace),
}

impl Scope {
    /// The namespace this scope is restricted to, if any.
    pub fn namespace(&self) -> Option<&Namespace> {
        match self {
            Scope::All => None,
            Scope::Only(ns) => Some(ns),
        }
    }

    /// Whether a run in `ns` is visible through this scope.
    pub fn admits(&self, ns: &Namespace) -> bool {
        match self {
            Scope::All => true,
            Scope::Only(own) => own == ns,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_and_legacy_values_read_as_default() {
        assert_eq!(Namespace::parse("").unwrap(), Namespace::default_ns());
        assert_eq!(Namespace::from_stored(None), Namespace::default_ns());
        assert_eq!(Namespace::from_stored(Some("")), Namespace::default_ns());
        assert_eq!(Namespace::from_stored(Some("acme")).as_str(), "acme");
    }

    #[test]
    fn tenant_names_follow_the_rules() {
        for ok in ["acme", "a", "0x", "blue_team-2", &"a".repeat(63)] {
            assert!(Namespace::tenant(ok).is_ok(), "{ok} should be accepted");
        }
        for bad in ["", "Acme", "-acme", "_a", "a@b", "a:b", "a.b", "a b", "ü"] {
            assert!(
                matches!(Namespace::tenant(bad), Err(NamespaceError::Invalid(_))),
                "{bad:?} should be invalid"
            );
        }
        assert!(matches!(
            Namespace::tenant(&"a".repeat(64)),
            Err(NamespaceError::TooLong(_))
        ));
        assert!(matches!(
            Namespace::tenant("default"),
            Err(NamespaceError::Reserved(_))
        ));
        assert!(matches!(
            Namespace::tenant("system"),
            Err(NamespaceError::Reserved(_))
        ));
        assert!(Namespace::parse("default").is_ok());
    }

    #[test]
    fn scope_admits_only_its_namespace() {
        let acme = Namespace::tenant("acme").unwrap();
        let globex = Namespace::tenant("globex").unwrap();
        assert!(Scope::All.admits(&acme));
        assert!(Scope::Only(acme.clone()).admits(&acme));
        assert!(!Scope::Only(acme).admits(&globex));
    }
}
