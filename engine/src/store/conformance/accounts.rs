//! The dashboard's accounts: session epochs and counted failed logins.

use std::sync::Arc;

use super::support::ns;
use crate::store::{AccountChange, Accounts, LoginLimit, NewUser, Reservation};

/// Dashboard accounts: "log out everywhere" moves the session epoch on, and failed logins are
/// reserved per key before each check, counted within the window, taken back on a right
/// password and forgotten on request.
pub async fn accounts_track_sessions_and_failed_logins(accounts: Arc<dyn Accounts>) {
    let user = accounts
        .create_user(
            NewUser {
                email: "a@acme.test".into(),
                tenant: Some(ns("acme")),
                role: crate::model::Role::Admin,
                password_hash: "x".into(),
            },
            1,
        )
        .await
        .expect("user");
    assert_eq!(user.session_epoch, 0);
    assert_eq!(
        accounts.bump_session_epoch(user.id).await.expect("bump"),
        Some(1)
    );
    let reread = accounts
        .user_by_id(user.id)
        .await
        .expect("read")
        .expect("user");
    assert_eq!(reread.session_epoch, 1);
    assert_eq!(
        accounts.bump_session_epoch(9_999).await.expect("bump"),
        None
    );

    // An operator's change: a new password, then disabled, then enabled; each ends the
    // account's sessions, and the other fields stay.
    let changed = accounts
        .change_account(
            "a@acme.test",
            AccountChange {
                password_hash: Some("y".into()),
                ..AccountChange::default()
            },
        )
        .await
        .expect("change")
        .expect("user");
    assert_eq!(
        (
            changed.password_hash.as_str(),
            changed.disabled,
            changed.session_epoch
        ),
        ("y", false, 2)
    );
    let disabled = accounts
        .change_account(
            "a@acme.test",
            AccountChange {
                disabled: Some(true),
                ..AccountChange::default()
            },
        )
        .await
        .expect("change")
        .expect("user");
    assert_eq!(
        (
            disabled.password_hash.as_str(),
            disabled.disabled,
            disabled.session_epoch
        ),
        ("y", true, 3)
    );
    assert!(
        accounts
            .user_by_email("a@acme.test")
            .await
            .expect("read")
            .expect("user")
            .disabled
    );
    let enabled = accounts
        .change_account(
            "a@acme.test",
            AccountChange {
                disabled: Some(false),
                ..AccountChange::default()
            },
        )
        .await
        .expect("change")
        .expect("user");
    assert!(!enabled.disabled);
    assert_eq!(
        accounts
            .change_account("nobody@acme.test", AccountChange::default())
            .await
            .expect("change"),
        None
    );

    let email = "email:a@acme.test".to_owned();
    let ip = "ip:10.0.0.1".to_owned();
    let limits = |email_allows: u64, ip_allows: u64| {
        [
            LoginLimit {
                key: email.clone(),
                allowed: email_allows,
            },
            LoginLimit {
                key: ip.clone(),
                allowed: ip_allows,
            },
        ]
    };
    for (n, at) in [100, 200, 300].into_iter().enumerate() {
        assert_eq!(
            accounts
                .reserve_login_attempt(&format!("failed-{n}"), &limits(5, 5), 0, at)
                .await
                .expect("reserve"),
            Reservation::Reserved
        );
    }
    // A right password takes its reservation back, under every key.
    accounts
        .reserve_login_attempt("right", &limits(5, 5), 0, 350)
        .await
        .expect("reserve");
    accounts
        .release_login_attempt("right")
        .await
        .expect("release");
    // Three failures under each key: the email allows three, so it is refused, and nothing is
    // reserved under the address either.
    assert_eq!(
        accounts
            .reserve_login_attempt("refused", &limits(3, 5), 0, 400)
            .await
            .expect("reserve"),
        Reservation::Refused { key: email.clone() }
    );
    // Only failures since the window's start count.
    assert_eq!(
        accounts
            .reserve_login_attempt("in-window", &limits(3, 4), 250, 400)
            .await
            .expect("reserve"),
        Reservation::Reserved
    );
    // The address now counts four (100, 200, 300, 400): the refused attempt left nothing.
    assert_eq!(
        accounts
            .reserve_login_attempt("over-ip", &limits(9, 4), 0, 500)
            .await
            .expect("reserve"),
        Reservation::Refused { key: ip.clone() }
    );
    // Clearing one key leaves the others.
    accounts.clear_login_failures(&email).await.expect("clear");
    assert_eq!(
        accounts
            .reserve_login_attempt("cleared", &limits(1, 9), 0, 600)
            .await
            .expect("reserve"),
        Reservation::Reserved
    );
    assert_eq!(
        accounts
            .reserve_login_attempt("still-counted", &limits(9, 5), 0, 700)
            .await
            .expect("reserve"),
        Reservation::Refused { key: ip }
    );
}

/// Attempts racing for the last failures of a key: exactly as many are reserved as the key
/// allows, however many run at once (the count and the reservation are one step).
pub async fn parallel_login_attempts_reserve_no_more_than_allowed(accounts: Arc<dyn Accounts>) {
    let attempts = (0..40).map(|n| {
        let accounts = accounts.clone();
        tokio::spawn(async move {
            let limits = [
                LoginLimit {
                    key: "email:race@acme.test".into(),
                    allowed: 5,
                },
                LoginLimit {
                    key: format!("ip:10.0.0.{n}"),
                    allowed: 20,
                },
            ];
            accounts
                .reserve_login_attempt(&format!("race-{n}"), &limits, 0, 1_000)
                .await
                .expect("reserve")
        })
    });
    let mut reserved = 0;
    for attempt in futures::future::join_all(attempts).await {
        if attempt.expect("task") == Reservation::Reserved {
            reserved += 1;
        }
    }
    assert_eq!(reserved, 5);
}

/// API tokens: stored with their secret's hash, found by id (revoked or not), listed per tenant
/// (the operator's apart), and revoked once, by a tenant only among its own.
pub async fn api_tokens_are_found_listed_and_revoked(accounts: Arc<dyn Accounts>) {
    use crate::gateway::{check_api_token, issue_api_token};
    use crate::model::TokenScope;

    let (ci, ci_secret) = issue_api_token(Some(ns("acme")), "ci", TokenScope::ReadWrite, None, 10);
    let (reader, _) = issue_api_token(Some(ns("acme")), "reader", TokenScope::Read, Some(500), 20);
    let (other, _) = issue_api_token(Some(ns("globex")), "g", TokenScope::ReadWrite, None, 30);
    let (operator, _) = issue_api_token(None, "ops", TokenScope::Operator, None, 40);
    let ci_id = ci.token.id.clone();
    let other_id = other.token.id.clone();
    for token in [ci.clone(), reader, other, operator] {
        accounts.create_token(token).await.expect("store");
    }
    let (found, hash) = accounts.token(&ci_id).await.expect("read").expect("found");
    assert_eq!((found, hash), (ci.token.clone(), ci.secret_hash.clone()));
    assert_eq!(
        accounts.token("0000000000000000").await.expect("read"),
        None
    );
    let names = |tokens: Vec<crate::model::ApiToken>| {
        tokens.into_iter().map(|t| t.name).collect::<Vec<_>>()
    };
    assert_eq!(
        names(accounts.tokens(Some(&ns("acme"))).await.expect("list")),
        ["reader", "ci"]
    );
    assert_eq!(names(accounts.tokens(None).await.expect("list")), ["ops"]);
    // Checked: live, then expired, then revoked.
    let checked = check_api_token(accounts.as_ref(), &ci_secret, 100)
        .await
        .expect("live");
    assert_eq!(checked.name, "ci");
    // acme cannot revoke globex's token; anyone's may be revoked with no tenant named.
    assert!(
        !accounts
            .revoke_token(&other_id, Some(&ns("acme")), 200)
            .await
            .expect("revoke")
    );
    assert!(
        accounts
            .revoke_token(&ci_id, Some(&ns("acme")), 200)
            .await
            .expect("revoke")
    );
    assert!(
        !accounts
            .revoke_token(&ci_id, None, 300)
            .await
            .expect("revoke"),
        "once"
    );
    let (revoked, _) = accounts.token(&ci_id).await.expect("read").expect("found");
    assert_eq!(revoked.revoked_at, Some(200));
    assert!(
        check_api_token(accounts.as_ref(), &ci_secret, 250)
            .await
            .is_err()
    );
}
