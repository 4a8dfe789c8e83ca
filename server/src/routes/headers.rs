//! The security headers every response carries: no MIME sniffing, no referrer sent off-site,
//! no framing, nothing stored by caches (pages and API answers hold a tenant's data; the
//! static assets under `/pkg/` may be stored but are revalidated on every use, since the main
//! wasm and its lazily loaded chunks keep their names across builds and must come from the
//! same one), and a Content-Security-Policy that allows
//! nothing for responses that are not pages (a page sets its own, with its nonce; see
//! `app::ssr::page_policy`). Over HTTPS, `Strict-Transport-Security` keeps browsers on it.

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::Response;

/// The most of a page [`page_policy_from_nonce`] reads (a page is tens of KiB).
const PAGE_LIMIT: usize = 8 << 20;

/// Adds the security headers to a response, leaving any the handler set itself.
pub async fn secure(State(https): State<bool>, request: Request, next: Next) -> Response {
    let static_asset = request.uri().path().starts_with("/pkg/");
    let mut response = next.run(request).await;
    let page = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/html"));
    if page
        && !response
            .headers()
            .contains_key(header::CONTENT_SECURITY_POLICY)
    {
        response = page_policy_from_nonce(response).await;
    }
    let headers = response.headers_mut();
    let defaults = [
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "same-origin"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (
            header::CONTENT_SECURITY_POLICY,
            "default-src 'none'; frame-ancestors 'none'",
        ),
    ];
    for (name, value) in defaults {
        headers
            .entry(name)
            .or_insert(HeaderValue::from_static(value));
    }
    let cache = if static_asset { "no-cache" } else { "no-store" };
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    if https {
        headers.insert(
            header::STRICT_TRANSPORT_SECURITY,
            HeaderValue::from_static("max-age=31536000"),
        );
    }
    response
}

/// A page that came without its policy gets the one its nonce calls for. Leptos sets a page's
/// policy through its response options, and a page of a browser test once came without it
/// (its scripts then blocked by the default, the page never hydrated): read from the page's own
/// `nonce="…"`, the policy is the one it was rendered for. A page with no nonce keeps the default.
async fn page_policy_from_nonce(response: Response) -> Response {
    let (mut parts, body) = response.into_parts();
    let bytes = match axum::body::to_bytes(body, PAGE_LIMIT).await {
        Ok(bytes) => bytes,
        Err(e) => {
            tracing::error!(error = %e, "could not read a page to set its policy");
            parts.status = axum::http::StatusCode::INTERNAL_SERVER_ERROR;
            return Response::from_parts(parts, Body::empty());
        }
    };
    let nonce = bytes
        .windows(7)
        .position(|w| w == b"nonce=\"")
        .map(|at| &bytes[at + 7..])
        .and_then(|rest| rest.iter().position(|&b| b == b'"').map(|end| &rest[..end]))
        .filter(|n| {
            !n.is_empty()
                && n.len() <= 128
                && n.iter()
                    .all(|b| b.is_ascii_alphanumeric() || b"+/=_-".contains(b))
        })
        .and_then(|n| std::str::from_utf8(n).ok());
    if let Some(policy) = nonce.and_then(|n| HeaderValue::from_str(&app::ssr::page_policy(n)).ok())
    {
        tracing::warn!("a page came without its Content-Security-Policy: set from its nonce");
        parts
            .headers
            .insert(header::CONTENT_SECURITY_POLICY, policy);
    }
    Response::from_parts(parts, Body::from(bytes))
}

#[cfg(test)]
mod tests {
    use axum::Router;
    use axum::routing::get;
    use tower::ServiceExt;

    use super::*;

    async fn policy_of(page: &'static str) -> String {
        let app = Router::new()
            .route("/", get(move || async move { axum::response::Html(page) }))
            .layer(axum::middleware::from_fn_with_state(false, secure));
        let response = app
            .oneshot(Request::get("/").body(Body::empty()).expect("request"))
            .await
            .expect("response");
        response
            .headers()
            .get(header::CONTENT_SECURITY_POLICY)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    }

    #[tokio::test]
    async fn a_page_without_its_policy_gets_the_one_its_nonce_calls_for() {
        let policy = policy_of("<html><script nonce=\"AbC123+/=\">x</script></html>").await;
        assert!(policy.contains("'nonce-AbC123+/='"), "{policy}");
        // No nonce, or one that is not a nonce: the default, which allows nothing.
        for page in ["<html>no scripts</html>", "<script nonce=\"a b\">"] {
            assert_eq!(
                policy_of(page).await,
                "default-src 'none'; frame-ancestors 'none'",
                "{page}"
            );
        }
    }
}
