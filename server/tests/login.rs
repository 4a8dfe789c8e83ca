//! The login against a burst: parallel wrong passwords cannot race past the failure limit, and
//! a burst of password checks cannot make the server hold memory without bound.

mod common;

use std::net::{IpAddr, Ipv4Addr};

use common::{Server, cli, post_login_form, set_session_cookie, tempdir};
use reqwest::StatusCode;
use tokio::task::JoinSet;

/// Posts a login as the hydrated page does (not asking for HTML), from `from`.
async fn try_login(url: String, from: IpAddr, email: String, password: String) -> StatusCode {
    let client = reqwest::Client::builder()
        .local_address(from)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client");
    client
        .post(url)
        .form(&[("email", email), ("password", password)])
        .send()
        .await
        .expect("POST the login")
        .status()
}

/// Posts every login of `tries` at once; the statuses, counted.
async fn burst(url: &str, tries: Vec<(IpAddr, String, String)>) -> Vec<(StatusCode, usize)> {
    let mut all = JoinSet::new();
    for (from, email, password) in tries {
        all.spawn(try_login(url.to_owned(), from, email, password));
    }
    let mut counts: Vec<(StatusCode, usize)> = Vec::new();
    while let Some(status) = all.join_next().await {
        let status = status.expect("task");
        match counts.iter_mut().find(|(s, _)| *s == status) {
            Some((_, n)) => *n += 1,
            None => counts.push((status, 1)),
        }
    }
    counts
}

fn count(counts: &[(StatusCode, usize)], status: StatusCode) -> usize {
    counts
        .iter()
        .find(|(s, _)| *s == status)
        .map_or(0, |(_, n)| *n)
}

/// The most memory the process has held at once (`VmHWM`), in KiB.
fn peak_rss_kib(server: &Server) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", server.child.id()))
        .expect("the server's /proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_wrong_passwords_get_five_checks_per_email_and_twenty_per_address() {
    let dir = tempdir();
    let server = Server::start(&dir, &[]).await;
    let email = "victim@acme.test";
    let added = cli(
        &server.db_url,
        &[
            "user", "add", "--tenant", "acme", "--role", "admin", "--email", email,
        ],
    );
    let password = added
        .lines()
        .find_map(|l| l.strip_prefix("password: "))
        .expect("a generated password")
        .to_owned();
    let url = server.url(&server.login_action().await);
    let home = IpAddr::V4(Ipv4Addr::LOCALHOST);

    let wrong = (0..200)
        .map(|n| (home, email.to_owned(), format!("guess-{n}")))
        .collect();
    let counts = burst(&url, wrong).await;
    // Each 401 is a password that was checked; every other attempt was refused unchecked.
    assert_eq!(count(&counts, StatusCode::UNAUTHORIZED), 5, "{counts:?}");
    assert_eq!(
        count(&counts, StatusCode::TOO_MANY_REQUESTS),
        195,
        "{counts:?}"
    );
    // The right password, after the burst, is refused with the rest: the email is locked.
    let right = try_login(url.clone(), home, email.to_owned(), password).await;
    assert_eq!(right, StatusCode::TOO_MANY_REQUESTS);

    // A new email for every attempt: the address's limit (twenty, five spent) still holds.
    let rotating = (0..200)
        .map(|n| (home, format!("nobody-{n}@acme.test"), "guess".to_owned()))
        .collect();
    let counts = burst(&url, rotating).await;
    assert_eq!(count(&counts, StatusCode::UNAUTHORIZED), 15, "{counts:?}");
    assert_eq!(
        count(&counts, StatusCode::TOO_MANY_REQUESTS),
        185,
        "{counts:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_password_checks_holds_bounded_memory() {
    let dir = tempdir();
    let server = Server::start(&dir, &[]).await;
    let url = server.url(&server.login_action().await);
    let before = peak_rss_kib(&server);
    // 200 logins, each from its own loopback address with its own email: no limit refuses
    // them, so each asks for an argon2 check (about 19 MiB each while it runs).
    let tries = (0..200u32)
        .map(|n| {
            let from = IpAddr::V4(Ipv4Addr::new(
                127,
                0,
                1 + (n / 250) as u8,
                1 + (n % 250) as u8,
            ));
            (from, format!("someone-{n}@acme.test"), "guess".to_owned())
        })
        .collect();
    let counts = burst(&url, tries).await;
    let checked = count(&counts, StatusCode::UNAUTHORIZED);
    let turned_away = count(&counts, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(checked + turned_away, 200, "{counts:?}");
    let grew_mib = peak_rss_kib(&server).saturating_sub(before) / 1024;
    // A few checks at once hold tens of MiB; 200 at once held gigabytes.
    assert!(
        grew_mib < 256,
        "the server's peak memory grew by {grew_mib} MiB over the burst"
    );
    // And it still answers.
    let again = try_login(
        url,
        IpAddr::V4(Ipv4Addr::LOCALHOST),
        "late@acme.test".into(),
        "guess".into(),
    )
    .await;
    assert_eq!(again, StatusCode::UNAUTHORIZED);
}

/// Logs in with a plain post; the session cookie when the login succeeded, else its status.
async fn log_in(
    server: &Server,
    action: &str,
    email: &str,
    password: &str,
) -> Result<String, StatusCode> {
    let answer = post_login_form(server, action, email, password, &[]).await;
    let cookie = set_session_cookie(&answer).and_then(|v| v.split(';').next().map(str::to_owned));
    match cookie {
        Some(cookie) if !answer.status().is_client_error() => Ok(cookie),
        _ => Err(answer.status()),
    }
}

/// Whether `cookie`'s session still opens the dashboard (rather than sending to the login).
async fn session_works(server: &Server, cookie: &str) -> bool {
    let page = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client")
        .get(server.url("/"))
        .header(reqwest::header::COOKIE, cookie)
        .send()
        .await
        .expect("GET /");
    page.status() == StatusCode::OK
}

/// `durable user <verb> --email EMAIL`; its output.
fn user_verb(server: &Server, verb: &str, email: &str) -> String {
    cli(&server.db_url, &["user", verb, "--email", email])
}

fn printed_password(output: &str) -> String {
    output
        .lines()
        .find_map(|l| l.strip_prefix("password: "))
        .expect("a generated password")
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_unlocks_resets_and_disables_accounts() {
    let dir = tempdir();
    let server = Server::start(&dir, &[]).await;
    let action = server.login_action().await;
    let email = "ada@acme.test";
    let first = printed_password(&cli(
        &server.db_url,
        &[
            "user", "add", "--tenant", "acme", "--role", "admin", "--email", email,
        ],
    ));

    // Locked out by five wrong passwords; unlocked, the right one works.
    for n in 0..5 {
        assert_eq!(
            log_in(&server, &action, email, &format!("wrong-{n}")).await,
            Err(StatusCode::UNAUTHORIZED)
        );
    }
    assert_eq!(
        log_in(&server, &action, email, &first).await,
        Err(StatusCode::TOO_MANY_REQUESTS)
    );
    assert!(user_verb(&server, "unlock", email).contains("failed logins cleared"));
    let session = log_in(&server, &action, email, &first)
        .await
        .expect("logged in");
    assert!(session_works(&server, &session).await);

    // A new password ends the sessions of the old one, which no longer logs in.
    let second = printed_password(&user_verb(&server, "passwd", email));
    assert!(!session_works(&server, &session).await);
    assert_eq!(
        log_in(&server, &action, email, &first).await,
        Err(StatusCode::UNAUTHORIZED)
    );
    let session = log_in(&server, &action, email, &second)
        .await
        .expect("logged in");

    // Disabled: its session ends and even the right password is refused; enabled, it logs in.
    assert!(user_verb(&server, "disable", email).contains("disabled"));
    assert!(!session_works(&server, &session).await);
    assert_eq!(
        log_in(&server, &action, email, &second).await,
        Err(StatusCode::FORBIDDEN)
    );
    assert!(user_verb(&server, "enable", email).contains("enabled"));
    let session = log_in(&server, &action, email, &second)
        .await
        .expect("logged in");
    assert!(session_works(&server, &session).await);

    // A user that does not exist is named, and nothing changes.
    let refused = std::process::Command::new(common::BIN)
        .args(["user", "disable", "--email", "nobody@acme.test"])
        .env("DATABASE_URL", &server.db_url)
        .output()
        .expect("run durable");
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("no user `nobody@acme.test`"));
}
