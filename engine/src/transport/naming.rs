//! The only place queue, channel and key names are built (aviary wire §1), so a typo can never
//! split a tenant's traffic.

use crate::model::Namespace;

/// The default prefix of every queue and key.
pub const DEFAULT_PREFIX: &str = "durable";

/// `prefix` for the default namespace, `prefix-<namespace>` for any other ("default is bare").
pub fn effective_prefix(prefix: &str, namespace: Option<&Namespace>) -> String {
    match namespace {
        Some(ns) if !ns.is_default() => format!("{prefix}-{ns}"),
        _ => prefix.to_owned(),
    }
}

/// A step or workflow name made safe for queue names: `:` becomes `-`, `.` is kept.
pub fn sanitize(name: &str) -> String {
    name.replace(':', "-")
}

/// The routing token of `name` on `partition`: `name@partition`, or bare `name` when the
/// partition is unset or `default`.
pub fn routing_token(name: &str, partition: Option<&Namespace>) -> String {
    let base = sanitize(name);
    match partition {
        Some(p) if !p.is_default() => format!("{base}@{p}"),
        _ => base,
    }
}

/// Splits a token back into its sanitized name and partition (`default` when bare).
pub fn split_token(token: &str) -> (&str, Namespace) {
    match token.rsplit_once('@') {
        Some((name, p)) => (name, Namespace::from_stored(Some(p))),
        None => (token, Namespace::default_ns()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns(s: &str) -> Namespace {
        Namespace::parse(s).unwrap()
    }

    #[test]
    fn prefixes_follow_default_is_bare() {
        let cases = [
            (None, "durable"),
            (Some(ns("")), "durable"),
            (Some(ns("default")), "durable"),
            (Some(ns("blue")), "durable-blue"),
        ];
        for (namespace, want) in cases {
            assert_eq!(
                effective_prefix(DEFAULT_PREFIX, namespace.as_ref()),
                want,
                "{namespace:?}"
            );
        }
    }

    #[test]
    fn tokens_match_the_wire_examples() {
        let cases = [
            ("extraction:page", Some(ns("acme")), "extraction-page@acme"),
            ("payments.charge-card", None, "payments.charge-card"),
            (
                "payments.charge-card",
                Some(ns("default")),
                "payments.charge-card",
            ),
            ("a:b:c", Some(ns("globex")), "a-b-c@globex"),
        ];
        for (name, partition, want) in cases {
            assert_eq!(routing_token(name, partition.as_ref()), want);
        }
    }

    #[test]
    fn tokens_split_back() {
        assert_eq!(split_token("a-b@acme"), ("a-b", ns("acme")));
        assert_eq!(
            split_token("payments.charge"),
            ("payments.charge", ns("default"))
        );
    }
}
