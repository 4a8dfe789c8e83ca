//! The security headers every response carries: no MIME sniffing, no referrer sent off-site,
//! no framing, nothing stored by caches (pages and API answers hold a tenant's data; the
//! static assets under `/pkg/` may be stored but are revalidated on every use, since the main
//! wasm and its lazily loaded chunks keep their names across builds and must come from the
//! same one), and a Content-Security-Policy that allows
//! nothing for responses that are not pages (a page sets its own, with its nonce; see
//! `app::ssr::page_policy`). Over HTTPS, `Strict-Transport-Security` keeps browsers on it.

use axum::extract::{Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::Response;

/// Adds the security headers to a response, leaving any the handler set itself.
pub async fn secure(State(https): State<bool>, request: Request, next: Next) -> Response {
    let static_asset = request.uri().path().starts_with("/pkg/");
    let mut response = next.run(request).await;
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
