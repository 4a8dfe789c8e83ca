//! Connection URLs in messages and logs: the password never appears.

/// `url` without its password (`scheme://user@host…`); a URL without credentials is returned
/// as it is. Used for every database and broker URL a message names.
pub fn redact(url: &str) -> String {
    match (url.split_once("://"), url.rsplit_once('@')) {
        (Some((scheme, rest)), Some((_, host))) if rest.contains('@') => {
            let user = rest.split(['@', ':']).next().unwrap_or("");
            format!("{scheme}://{user}@{host}")
        }
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_left_out() {
        assert_eq!(
            redact("redis://user:secret@10.0.0.1:6379/0"),
            "redis://user@10.0.0.1:6379/0"
        );
        assert_eq!(
            redact("postgres://app:p@ss@db.internal/durable"),
            "postgres://app@db.internal/durable"
        );
        assert_eq!(redact("redis://127.0.0.1:6379"), "redis://127.0.0.1:6379");
        assert_eq!(
            redact("sqlite://./data/durable.db"),
            "sqlite://./data/durable.db"
        );
    }
}
