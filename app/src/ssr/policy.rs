//! The Content-Security-Policy of a dashboard page: scripts only from this server or carrying
//! the page's nonce (Leptos puts it on its hydration and streaming scripts), WebAssembly allowed
//! to compile, no plugins, no framing, forms posting only here. Injected script, a framed
//! dashboard (clickjacking) and exfiltration to another host are refused by the browser. Inline
//! style attributes are allowed: the timeline positions its bars with them, and a style cannot
//! run code.

/// The policy of a page rendered with `nonce`.
pub fn page_policy(nonce: &str) -> String {
    format!(
        "default-src 'self'; script-src 'self' 'nonce-{nonce}' 'wasm-unsafe-eval'; \
         style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; \
         object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    )
}

/// Sends the page's policy with the page being rendered: the nonce is the one Leptos generated
/// for this response. (Other responses get a stricter default from the server.)
pub fn send_page_policy() {
    use axum::http::{HeaderValue, header};
    use leptos::prelude::use_context;

    let (Some(nonce), Some(response)) = (
        leptos::nonce::use_nonce(),
        use_context::<leptos_axum::ResponseOptions>(),
    ) else {
        return;
    };
    if let Ok(policy) = HeaderValue::from_str(&page_policy(&nonce)) {
        response.insert_header(header::CONTENT_SECURITY_POLICY, policy);
    }
}
