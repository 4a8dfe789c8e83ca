//! One `durable.http` call: the input a workflow gives, the request built from it and the
//! connection, redirects followed by hand (each target checked; the connection's secret headers
//! go only to its own origin), and the reply or the failure the step ends with.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue, LOCATION};
use reqwest::{Method, StatusCode, Url};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::HttpStepConfig;
use super::egress::{EgressError, EgressPolicy, GuardedResolver};
use crate::model::{Connection, ConnectionKind, StepFailure, check_header};

/// The methods a call may use.
const METHODS: [&str; 7] = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"];

/// How much of an error response's body its failure keeps.
const FAILURE_BODY_CHARS: usize = 2048;

/// The input of `durable.http`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpCall {
    /// The tenant's `http` connection to call through.
    pub connection: String,
    /// `GET` (the default), `POST`, `PUT`, `PATCH`, `DELETE`, `HEAD` or `OPTIONS`.
    #[serde(default = "HttpCall::get")]
    pub method: String,
    /// The path under the connection's base URL (`charges/ch_1`); it may not leave it.
    #[serde(default)]
    pub path: String,
    /// Query parameters added to the URL.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub query: BTreeMap<String, String>,
    /// Headers added to the connection's (not to its secret ones, which they may not name).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// A JSON body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<Value>,
    /// The call's timeout, redirects and body included (default 30 s, at most 300 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

impl HttpCall {
    fn get() -> String {
        "GET".to_owned()
    }
}

/// The output of `durable.http`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HttpReply {
    /// The final response's status.
    pub status: u16,
    /// Its headers, names in lowercase, repeated ones joined with `, `.
    pub headers: BTreeMap<String, String>,
    /// Its body: JSON when it parses, else the text, `null` when empty.
    pub body: Value,
}

/// The client and the rules every call of one registration shares.
pub(super) struct Caller {
    client: reqwest::Client,
    config: HttpStepConfig,
    egress: Arc<EgressPolicy>,
}

fn fatal(code: &str, message: String) -> StepFailure {
    StepFailure::new(message).with_code(code).fatal()
}

fn retry(code: &str, message: String) -> StepFailure {
    StepFailure::new(message).with_code(code)
}

/// Whether `url` (scheme and origin) may be called: `http(s)`, and a literal address only if
/// the policy allows it (names are checked as they resolve).
fn check_target(egress: &EgressPolicy, url: &Url) -> Result<(), StepFailure> {
    if !matches!(url.scheme(), "http" | "https") {
        return Err(fatal(
            "address_refused",
            format!("`{url}` is not an http or https URL"),
        ));
    }
    let Some(host) = url.host_str() else {
        return Err(fatal("address_refused", format!("`{url}` has no host")));
    };
    // A literal address (IPv6 in brackets) reaches no resolver: it is checked here.
    let literal = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = literal.parse::<std::net::IpAddr>() {
        egress
            .check(host, ip)
            .map_err(|e| fatal("address_refused", e.to_string()))?;
    }
    Ok(())
}

/// The URL of `path` under `base`, refused if it leaves the base URL (another origin, or
/// `..` above its path).
fn target(base: &Url, call: &HttpCall) -> Result<Url, StepFailure> {
    let path = call.path.trim_start_matches('/');
    let joined = if path.is_empty() {
        base.as_str().to_owned()
    } else {
        format!("{}/{path}", base.as_str().trim_end_matches('/'))
    };
    let mut url = Url::parse(&joined).map_err(|e| {
        fatal(
            "bad_path",
            format!("path `{}` does not make a URL: {e}", call.path),
        )
    })?;
    let base_path = base.path().trim_end_matches('/');
    if url.origin() != base.origin() || !url.path().starts_with(base_path) {
        return Err(fatal(
            "bad_path",
            format!(
                "path `{}` leaves the connection's base URL `{base}`; give a path under it",
                call.path
            ),
        ));
    }
    if !call.query.is_empty() {
        url.query_pairs_mut().extend_pairs(&call.query);
    }
    Ok(url)
}

/// The error `e` failed with, if a refused address was its cause.
fn refused_address(e: &reqwest::Error) -> Option<&EgressError> {
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        if let Some(refused) = cause.downcast_ref::<EgressError>() {
            return Some(refused);
        }
        source = cause.source();
    }
    None
}

impl Caller {
    pub(super) fn new(config: HttpStepConfig) -> Result<Self, reqwest::Error> {
        let egress = Arc::new(config.egress.clone());
        let client = reqwest::Client::builder()
            // Proxies from the environment would connect where the policy never looked.
            .no_proxy()
            .dns_resolver(Arc::new(GuardedResolver::new(egress.clone())))
            // Followed by hand, so each is checked and secrets stay with their origin.
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        Ok(Caller {
            client,
            config,
            egress,
        })
    }

    /// Calls `input` through `connection`.
    pub(super) async fn call(
        &self,
        connection: &Connection,
        input: HttpCall,
    ) -> Result<HttpReply, StepFailure> {
        if connection.kind != ConnectionKind::Http {
            return Err(fatal(
                "bad_connection",
                format!(
                    "connection `{}` is a `{}` connection; durable.http calls through an `http` one",
                    connection.name,
                    connection.kind.as_str()
                ),
            ));
        }
        let base = connection
            .base_url
            .as_deref()
            .and_then(|u| Url::parse(u).ok())
            .ok_or_else(|| {
                fatal(
                    "bad_connection",
                    format!("connection `{}` has no valid base_url", connection.name),
                )
            })?;
        let method = input.method.to_ascii_uppercase();
        if !METHODS.contains(&method.as_str()) {
            return Err(fatal(
                "invalid_input",
                format!(
                    "method `{}` is not one of {}",
                    input.method,
                    METHODS.join(", ")
                ),
            ));
        }
        let method = Method::from_bytes(method.as_bytes())
            .map_err(|_| fatal("invalid_input", format!("method `{}`", input.method)))?;
        let url = target(&base, &input)?;
        let (own, shared) = self.headers(connection, &input)?;
        let timeout = input
            .timeout_ms
            .map(Duration::from_millis)
            .unwrap_or(self.config.default_timeout)
            .min(self.config.max_timeout);
        let sent = self.send(method, url, &base, own, shared, input.body.as_ref());
        match tokio::time::timeout(timeout, sent).await {
            Ok(reply) => reply,
            Err(_) => Err(retry(
                "http_timeout",
                format!("the call did not finish within {} ms", timeout.as_millis()),
            )),
        }
    }

    /// The headers for the connection's own origin (everything), and for any other a redirect
    /// leads to (the call's and the connection's readable ones).
    fn headers(
        &self,
        connection: &Connection,
        input: &HttpCall,
    ) -> Result<(HeaderMap, HeaderMap), StepFailure> {
        let mut shared = HeaderMap::new();
        let insert = |map: &mut HeaderMap, name: &str, value: &str| -> Result<(), StepFailure> {
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|e| fatal("invalid_input", format!("header `{name}`: {e}")))?;
            let value = HeaderValue::from_str(value)
                .map_err(|e| fatal("invalid_input", format!("header `{name}`: {e}")))?;
            map.insert(name, value);
            Ok(())
        };
        for (name, value) in &connection.headers {
            insert(&mut shared, name, value)?;
        }
        for (name, value) in &input.headers {
            check_header(name, value).map_err(|e| fatal("invalid_input", e.to_string()))?;
            if connection
                .secrets()
                .any(|(secret, _)| secret.eq_ignore_ascii_case(name))
            {
                return Err(fatal(
                    "invalid_input",
                    format!(
                        "header `{name}` is a secret header of connection `{}` and cannot be set by a call",
                        connection.name
                    ),
                ));
            }
            insert(&mut shared, name, value)?;
        }
        let mut own = shared.clone();
        for (name, value) in connection.secrets() {
            let mut value = HeaderValue::from_str(value).map_err(|_| {
                fatal(
                    "bad_connection",
                    format!(
                        "secret header `{name}` of connection `{}` is not a valid header value",
                        connection.name
                    ),
                )
            })?;
            value.set_sensitive(true);
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|e| fatal("bad_connection", format!("header `{name}`: {e}")))?;
            own.insert(name, value);
        }
        Ok((own, shared))
    }

    async fn send(
        &self,
        mut method: Method,
        mut url: Url,
        base: &Url,
        own: HeaderMap,
        shared: HeaderMap,
        body: Option<&Value>,
    ) -> Result<HttpReply, StepFailure> {
        let mut body = body.cloned();
        let mut redirects = 0;
        loop {
            check_target(&self.egress, &url)?;
            let headers = if url.origin() == base.origin() {
                own.clone()
            } else {
                shared.clone()
            };
            let mut request = self
                .client
                .request(method.clone(), url.clone())
                .headers(headers);
            if let Some(body) = &body {
                request = request.json(body);
            }
            let response = request.send().await.map_err(|e| self.failed(&url, &e))?;
            let status = response.status();
            if status.is_redirection()
                && let Some(location) = response.headers().get(LOCATION)
            {
                redirects += 1;
                if redirects > self.config.max_redirects {
                    return Err(fatal(
                        "too_many_redirects",
                        format!(
                            "more than {} redirects from `{url}`",
                            self.config.max_redirects
                        ),
                    ));
                }
                let location = location.to_str().unwrap_or_default();
                url = url.join(location).map_err(|e| {
                    fatal(
                        "bad_redirect",
                        format!("redirect to `{location}` from `{url}`: {e}"),
                    )
                })?;
                if matches!(
                    status,
                    StatusCode::MOVED_PERMANENTLY | StatusCode::FOUND | StatusCode::SEE_OTHER
                ) && method != Method::HEAD
                {
                    method = Method::GET;
                    body = None;
                }
                continue;
            }
            return self.reply(&url, response).await;
        }
    }

    fn failed(&self, url: &Url, e: &reqwest::Error) -> StepFailure {
        if let Some(refused) = refused_address(e) {
            return fatal("address_refused", refused.to_string());
        }
        let what = if e.is_connect() {
            "could not connect to"
        } else {
            "the call failed at"
        };
        // The URL is the connection's base and the call's path: no secret is in it.
        retry("http_connect", format!("{what} `{url}`: {e}"))
    }

    async fn reply(
        &self,
        url: &Url,
        mut response: reqwest::Response,
    ) -> Result<HttpReply, StepFailure> {
        let status = response.status();
        let mut headers: BTreeMap<String, String> = BTreeMap::new();
        for (name, value) in response.headers() {
            let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
            headers
                .entry(name.as_str().to_owned())
                .and_modify(|v| {
                    v.push_str(", ");
                    v.push_str(&value);
                })
                .or_insert(value);
        }
        let limit = self.config.max_response_bytes;
        if response.content_length().is_some_and(|n| n > limit as u64) {
            return Err(too_large(url, limit));
        }
        let mut bytes = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| self.failed(url, &e))? {
            if bytes.len() + chunk.len() > limit {
                return Err(too_large(url, limit));
            }
            bytes.extend_from_slice(&chunk);
        }
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
        };
        if status.is_client_error() || status.is_server_error() {
            let shown = match &body {
                Value::String(text) => {
                    Value::String(text.chars().take(FAILURE_BODY_CHARS).collect())
                }
                other if other.to_string().len() <= FAILURE_BODY_CHARS => other.clone(),
                other => {
                    Value::String(other.to_string().chars().take(FAILURE_BODY_CHARS).collect())
                }
            };
            let failure = StepFailure {
                details: Some(json!({"status": status.as_u16(), "body": shown})),
                ..StepFailure::new(format!("`{url}` answered {status}"))
            }
            .with_code(format!("http_{}", status.as_u16()));
            let again = status.is_server_error()
                || matches!(
                    status,
                    StatusCode::REQUEST_TIMEOUT | StatusCode::TOO_MANY_REQUESTS
                );
            return Err(if again { failure } else { failure.fatal() });
        }
        Ok(HttpReply {
            status: status.as_u16(),
            headers,
            body,
        })
    }
}

fn too_large(url: &Url, limit: usize) -> StepFailure {
    fatal(
        "response_too_large",
        format!("the response of `{url}` is larger than {limit} bytes, the most the step reads"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(path: &str) -> HttpCall {
        HttpCall {
            connection: "api".into(),
            method: "GET".into(),
            path: path.into(),
            query: BTreeMap::from([("a b".to_owned(), "c&d".to_owned())]),
            headers: BTreeMap::new(),
            body: None,
            timeout_ms: None,
        }
    }

    #[test]
    fn a_path_stays_under_the_base_url() {
        let base = Url::parse("https://api.example.com/v1/").unwrap();
        assert_eq!(
            target(&base, &call("/charges/ch_1")).unwrap().as_str(),
            "https://api.example.com/v1/charges/ch_1?a+b=c%26d"
        );
        assert_eq!(
            target(&base, &call("")).unwrap().as_str(),
            "https://api.example.com/v1/?a+b=c%26d"
        );
        for escape in ["../admin", "x/../../admin", "//evil.com/x", "@evil.com"] {
            let url = target(&base, &call(escape));
            assert!(
                url.as_ref()
                    .is_err_and(|e| e.code.as_deref() == Some("bad_path"))
                    || url
                        .as_ref()
                        .is_ok_and(|u| u.host_str() == Some("api.example.com")
                            && u.path().starts_with("/v1/")),
                "{escape}: {url:?}"
            );
        }
    }

    #[test]
    fn literal_addresses_are_checked_before_any_connection() {
        let policy = EgressPolicy::public_only();
        for url in [
            "http://127.0.0.1/",
            "http://[::1]:8080/",
            "http://169.254.169.254/latest/meta-data/",
            "http://[::ffff:10.0.0.1]/",
            "file:///etc/passwd",
        ] {
            let refused = check_target(&policy, &Url::parse(url).unwrap()).unwrap_err();
            assert_eq!(refused.code.as_deref(), Some("address_refused"), "{url}");
            assert_eq!(refused.retryable, Some(false));
        }
        assert!(check_target(&policy, &Url::parse("https://example.com/").unwrap()).is_ok());
    }
}
