//! Where browsers reach the dashboard (`DURABLE_PUBLIC_URL`), when the server sits behind a
//! proxy or TLS terminator: the CSRF check compares a request's `Origin` with it (rather than
//! with a `X-Forwarded-Host` any client can send), and over HTTPS the session cookie is
//! `Secure` with the `__Host-` prefix and responses carry `Strict-Transport-Security`.

use std::fmt;
use std::str::FromStr;

/// The origin browsers use for this server: `scheme://host[:port]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PublicUrl {
    origin: String,
    https: bool,
}

impl PublicUrl {
    /// `scheme://host[:port]`, as browsers send it in `Origin`.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// Whether browsers reach the server over HTTPS.
    pub fn is_https(&self) -> bool {
        self.https
    }
}

impl fmt::Display for PublicUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.origin)
    }
}

impl FromStr for PublicUrl {
    type Err = String;

    fn from_str(raw: &str) -> Result<Self, String> {
        let refuse = || {
            format!(
                "`{raw}` is not a public URL: write the scheme and host browsers use, such as https://durable.example.com (a port is allowed, a path is not)"
            )
        };
        let trimmed = raw.trim().trim_end_matches('/');
        let (scheme, authority) = trimmed.split_once("://").ok_or_else(refuse)?;
        let https = match scheme.to_ascii_lowercase().as_str() {
            "https" => true,
            "http" => false,
            _ => return Err(refuse()),
        };
        let valid = !authority.is_empty()
            && authority
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']'));
        if !valid {
            return Err(refuse());
        }
        Ok(PublicUrl {
            origin: format!(
                "{}://{}",
                if https { "https" } else { "http" },
                authority.to_ascii_lowercase()
            ),
            https,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_an_origin_and_refuses_anything_else() {
        let url: PublicUrl = "https://Durable.Example.com/".parse().expect("url");
        assert_eq!(url.origin(), "https://durable.example.com");
        assert!(url.is_https());
        let local: PublicUrl = "http://127.0.0.1:3000".parse().expect("url");
        assert!(!local.is_https());
        for bad in [
            "durable.example.com",
            "ftp://x",
            "https://",
            "https://x/path",
            "https://x?q",
        ] {
            assert!(bad.parse::<PublicUrl>().is_err(), "{bad}");
        }
    }
}
