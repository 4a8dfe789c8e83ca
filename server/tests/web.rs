//! The web defaults of the real server: security headers on every response (a page's policy
//! with the nonce its scripts carry), the CSRF check judged against the configured public
//! origin and never a client-sent `X-Forwarded-Host`, and over HTTPS a `Secure`, `__Host-`
//! session cookie.

mod common;

use common::{Server, cli, post_login_form, set_session_cookie, tempdir};
use reqwest::StatusCode;
use reqwest::header::HeaderMap;

fn header<'a>(headers: &'a HeaderMap, name: &str) -> &'a str {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_else(|| panic!("no `{name}` header in {headers:?}"))
}

/// The headers every response carries, whatever it is.
fn assert_hardened(headers: &HeaderMap, what: &str) {
    assert_eq!(
        header(headers, "x-content-type-options"),
        "nosniff",
        "{what}"
    );
    assert_eq!(header(headers, "x-frame-options"), "DENY", "{what}");
    assert_eq!(header(headers, "referrer-policy"), "same-origin", "{what}");
    assert_eq!(header(headers, "cache-control"), "no-store", "{what}");
    assert!(
        header(headers, "content-security-policy").contains("frame-ancestors 'none'"),
        "{what}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_response_carries_the_security_headers() {
    let dir = tempdir();
    let server = Server::start(&dir, &[]).await;
    let client = reqwest::Client::new();

    let page = client
        .get(server.url("/login"))
        .send()
        .await
        .expect("GET /login");
    let headers = page.headers().clone();
    assert_hardened(&headers, "a page");
    let policy = header(&headers, "content-security-policy").to_owned();
    assert!(policy.contains("script-src 'self' 'nonce-"), "{policy}");
    assert!(!policy.contains("'unsafe-inline' 'wasm"), "{policy}");
    assert!(headers.get("strict-transport-security").is_none());
    // The nonce in the policy is the one the page's own scripts carry, and no other.
    let nonce = policy
        .split("'nonce-")
        .nth(1)
        .and_then(|rest| rest.split('\'').next())
        .expect("a nonce")
        .to_owned();
    let html = page.text().await.expect("html");
    assert!(html.contains(&format!(r#"nonce="{nonce}""#)), "{html}");
    let again = client
        .get(server.url("/login"))
        .send()
        .await
        .expect("GET /login");
    assert!(
        !header(again.headers(), "content-security-policy").contains(&nonce),
        "a nonce is used once"
    );

    let token = server.token("acme");
    let api = client
        .get(server.url("/api/v1/runs"))
        .bearer_auth(&token)
        .send()
        .await
        .expect("GET /api/v1/runs");
    assert_eq!(api.status(), StatusCode::OK);
    assert_hardened(api.headers(), "an API answer");
    assert_eq!(
        header(api.headers(), "content-security-policy"),
        "default-src 'none'; frame-ancestors 'none'"
    );
    let refused = client
        .get(server.url("/api/v1/runs"))
        .send()
        .await
        .expect("GET without a token");
    assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);
    assert_hardened(refused.headers(), "an API error");
    let health = client
        .get(server.url("/healthz"))
        .send()
        .await
        .expect("GET /healthz");
    assert_hardened(health.headers(), "the health check");
}

/// Posts a wrong login with `headers`; the answer's status.
async fn post_login(server: &Server, action: &str, headers: &[(&str, &str)]) -> StatusCode {
    post_login_form(server, action, "nobody@acme.test", "guess", headers)
        .await
        .status()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cross_site_posts_are_refused_whatever_the_forwarded_host_says() {
    let dir = tempdir();
    let server = Server::start(&dir, &[]).await;
    let action = server.login_action().await;
    let own = server.base.clone();
    // The page's own origin passes the check (and fails the login).
    assert_eq!(
        post_login(&server, &action, &[("origin", &own)]).await,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        post_login(&server, &action, &[("origin", "https://evil.example")]).await,
        StatusCode::FORBIDDEN
    );
    // A forwarded host names whatever the client likes: it is not the dashboard's origin.
    assert_eq!(
        post_login(
            &server,
            &action,
            &[
                ("origin", "https://evil.example"),
                ("x-forwarded-host", "evil.example")
            ]
        )
        .await,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        post_login(&server, &action, &[("sec-fetch-site", "cross-site")]).await,
        StatusCode::FORBIDDEN
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_https_the_public_origin_is_judged_and_the_cookie_is_secure() {
    let dir = tempdir();
    let public = "https://durable.example.com";
    let server = Server::start(&dir, &[("DURABLE_PUBLIC_URL", public.to_owned())]).await;
    let action = server.login_action().await;
    // Only the public origin is the dashboard's own, not the address the server listens on.
    assert_eq!(
        post_login(&server, &action, &[("origin", &server.base)]).await,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        post_login(&server, &action, &[("origin", public)]).await,
        StatusCode::UNAUTHORIZED
    );
    let health = reqwest::get(server.url("/healthz")).await.expect("GET");
    assert!(header(health.headers(), "strict-transport-security").contains("max-age="));

    let email = "ops@acme.test";
    let added = cli(
        &server.db_url,
        &["user", "add", "--role", "operator", "--email", email],
    );
    let password = added
        .lines()
        .find_map(|l| l.strip_prefix("password: "))
        .expect("a generated password");
    let answer = post_login_form(&server, &action, email, password, &[("origin", public)]).await;
    let cookie = set_session_cookie(&answer)
        .unwrap_or_else(|| panic!("no session cookie: {:?}", answer.headers()));
    assert!(cookie.starts_with("__Host-durable_session="), "{cookie}");
    for part in ["Secure", "HttpOnly", "SameSite=Lax", "Path=/"] {
        assert!(cookie.contains(part), "{part} in {cookie}");
    }
    assert!(!cookie.contains("Domain="), "{cookie}");
}
